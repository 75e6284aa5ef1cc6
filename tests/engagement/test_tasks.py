"""The periodic task refreshes workspaces that have new data, and only those."""

import pytest

from engagement.models import UserScore
from engagement.services import product_create
from engagement.tasks import scores_refresh_due
from tests.engagement.helpers import apply, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def test_periodic_refresh_scores_new_events_and_skips_idle_workspaces(acme, eager_tasks, settings):
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    _, quiet = product_create(name="Quiet")
    assert scores_refresh_due() == 2  # never scored: both start with a full rescore
    assert scores_refresh_due() == 0
    apply(acme, track("u1", "Login"))
    assert scores_refresh_due() == 1  # only Acme has new data
    score = UserScore.objects.get(workspace=acme.workspace, user__tracking_id="u1")
    assert (score.raw_score, score.engagement_score) == (1, 100)
    assert not UserScore.objects.filter(workspace=quiet).exists()
