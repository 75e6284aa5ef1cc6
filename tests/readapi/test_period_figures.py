"""The hosted original's metric names on account and user records: score_yesterday,
score_last_period, overall_scored_events and recently_scored_events, hand-computed."""

from datetime import timedelta

import pytest
from django.utils import timezone

from engagement.models import AccountScoreDay, EventWeight
from engagement.scoring import workspace_rescore
from tests.engagement.helpers import apply, group, track

pytestmark = pytest.mark.both_databases


@pytest.fixture
def scored(acme):
    """Ann (user a1) of Acme (account A): Login weighs 2, Ignored 0; Ann logged in 3 times today
    and twice 40 days ago (before both windows), and sent Ignored 5 times today. Yesterday's
    stored daily score of Acme is 42; Ann has none (seen before yesterday: 0)."""
    workspace = acme.workspace
    EventWeight.objects.create(workspace=workspace, event_name="Login", weight=2)
    EventWeight.objects.create(workspace=workspace, event_name="Ignored", weight=0)
    apply(
        acme,
        group("a1", "A", {"name": "Acme"}),
        track("a1", "Login", times=3),
        track("a1", "Login", times=2, days_ago=40),
        track("a1", "Ignored", times=5),
    )
    workspace_rescore(workspace_id=workspace.id)
    account = acme.product.accounts.get(tracking_id="A")
    AccountScoreDay.objects.create(
        account=account,
        workspace=workspace,
        day=timezone.now().date() - timedelta(days=1),
        engagement_score=42,
        raw_score=6,
    )
    return acme


def test_an_accounts_period_figures(read, scored):
    body = read(scored, "/v2/accounts", workspace_id=scored.workspace.id).json()
    (acme,) = body["data"]
    assert acme["score_yesterday"] == 42
    assert acme["score_last_period"] == acme["previous_score"]
    assert acme["recently_scored_events"] == 3  # Login today; Ignored weighs 0
    assert acme["overall_scored_events"] == 5  # Login ever: 3 + 2


def test_a_users_period_figures_on_the_list_and_the_record(read, scored):
    listed = read(scored, "/v2/users", workspace_id=scored.workspace.id).json()["data"]
    (ann,) = listed
    # No stored point yesterday, and Ann was first seen 40 days ago: 0, as her history reads.
    assert (ann["score_yesterday"], ann["recently_scored_events"]) == (0, 3)
    assert ann["overall_scored_events"] == 5
    one = read(scored, f"/v2/users/{ann['id']}", workspace_id=scored.workspace.id).json()
    assert {k: one[k] for k in ann if k != "_links"} == {k: ann[k] for k in ann if k != "_links"}


def test_score_yesterday_is_null_before_first_seen_as_in_the_history(read, acme):
    """Bo and Bolt are first seen today: yesterday they had no score, in the record and in the
    history alike (no invented 0)."""
    apply(acme, group("b1", "B", {"name": "Bolt"}, days_ago=0), track("b1", "Login", times=2))
    workspace_rescore(workspace_id=acme.workspace.id)
    ws = acme.workspace.id
    for path in ("/v2/users", "/v2/accounts"):
        (record,) = read(acme, path, workspace_id=ws).json()["data"]
        history = read(acme, f"{path}/{record['id']}/history", workspace_id=ws, days=2).json()
        yesterday, today = history["data"]
        assert record["score_yesterday"] is None
        assert (yesterday["engagement_score"], yesterday["raw_score"]) == (None, None)
        assert today["engagement_score"] == record["engagement_score"] == 100
