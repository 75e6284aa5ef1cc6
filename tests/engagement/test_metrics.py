"""Engagement's metrics: refresh durations counted per mode, each workspace's scores' age, and
erasure requests by status, as a scrape would read them."""

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from engagement.metrics import ErasuresCollector, ScoresAgeCollector
from engagement.models import Erasure, ScoringState
from engagement.tasks import workspace_refresh
from tests.engagement.helpers import apply, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def scrape() -> CollectorRegistry:
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    registry.register(ScoresAgeCollector())
    registry.register(ErasuresCollector())
    return registry


def test_a_refresh_is_timed_and_the_scores_age_is_read_per_workspace(acme, globex):
    name = "eds_score_refresh_duration_seconds_count"
    before = scrape().get_sample_value(name, {"mode": "full"}) or 0
    apply(acme, track("u1", "Login"))

    assert workspace_refresh(acme.workspace.id) == "full"

    registry = scrape()
    assert registry.get_sample_value(name, {"mode": "full"}) >= before + 1
    workspace = str(acme.workspace.id)
    assert registry.get_sample_value("eds_scores_age_seconds", {"workspace": workspace}) < 60
    assert (
        registry.get_sample_value("eds_scores_age_seconds", {"workspace": str(globex.workspace.id)})
        is None
    )

    ScoringState.objects.filter(workspace=acme.workspace).update(
        scored_through=timezone.now() - timedelta(hours=2)
    )
    age = scrape().get_sample_value("eds_scores_age_seconds", {"workspace": workspace})
    assert 7200 <= age < 7260


def test_a_refresh_counts_the_users_and_accounts_it_recomputed(acme, settings):
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0  # the second refresh reads only what followed
    name = "eds_score_refresh_recomputed_total"

    def counted(mode: str, kind: str) -> float:
        return scrape().get_sample_value(name, {"mode": mode, "kind": kind}) or 0

    apply(acme, track("u1", "Login", account="acct-1"))
    assert workspace_refresh(acme.workspace.id) == "full"
    users_before = counted("incremental", "user")
    accounts_before = counted("incremental", "account")
    apply(
        acme,
        track("u2", "Login", account="acct-2"),
        track("u3", "Login", account="acct-2"),
    )

    assert workspace_refresh(acme.workspace.id) == "incremental"

    assert counted("incremental", "user") == users_before + 2
    assert counted("incremental", "account") == accounts_before + 1
    assert workspace_refresh(acme.workspace.id) == "idle"
    assert counted("incremental", "user") == users_before + 2


def test_erasures_are_counted_by_status_with_the_oldest_unfinished_age(acme):
    def request(status: str) -> Erasure:
        return Erasure.objects.create(
            product=acme.product, kind="user", target_id=1, via="api", status=status
        )

    request("completed")
    request("completed")
    pending = request("pending")
    Erasure.objects.filter(id=pending.id).update(requested_at=timezone.now() - timedelta(minutes=5))

    registry = scrape()
    counts = {
        status: registry.get_sample_value("eds_erasures", {"status": status})
        for status in Erasure.Status.values
    }
    assert counts == {"pending": 1, "running": 0, "completed": 2, "failed": 0}
    age = registry.get_sample_value("eds_erasure_oldest_unfinished_age_seconds")
    assert 300 <= age < 360
