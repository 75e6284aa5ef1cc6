"""Refreshes on demand (engagement/scoring/demand.py): a committed change queues its workspace's
refresh, one at a time; beat's sweep catches what was lost and looks only where something
changed."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from engagement import tasks
from engagement.models import RefreshDemand, ScoringState, User, UserScore
from engagement.refresh_hooks import refresh_hook_register, refresh_hook_unregister
from engagement.scoring import (
    refresh_demand_after,
    refresh_demand_busy,
    workspace_refresh,
    workspaces_to_sweep,
)
from engagement.services import account_prefixed_traits_replace, product_create
from tests.conftest import other_session
from tests.engagement.helpers import apply, erase, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def scored_users(tenant) -> set[str]:
    return set(
        UserScore.objects.filter(workspace=tenant.workspace).values_list(
            "user__tracking_id", flat=True
        )
    )


def queued_at(tenant):
    return (
        RefreshDemand.objects.filter(workspace=tenant.workspace)
        .values_list("queued_at", flat=True)
        .first()
    )


def test_a_committed_change_queues_the_refresh_that_scores_it(
    acme, eager_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        apply(acme, track("ada", "Login"))

    assert scored_users(acme) == {"ada"}
    assert RefreshDemand.objects.filter(workspace=acme.workspace, queued_at=None).exists()


def test_a_change_while_a_refresh_is_queued_rides_on_it(
    acme, eager_tasks, django_capture_on_commit_callbacks
):
    waiting_since = timezone.now()
    RefreshDemand.objects.create(workspace=acme.workspace, queued_at=waiting_since)

    with django_capture_on_commit_callbacks(execute=True):
        apply(acme, track("ada", "Login"))

    assert scored_users(acme) == set()  # no second refresh was sent
    assert queued_at(acme) == waiting_since  # the queued one will read it


def test_the_refresh_is_queued_only_once_the_change_commits(
    acme, eager_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        apply(acme, track("ada", "Login"))
    assert scored_users(acme) == set()
    assert not RefreshDemand.objects.exists()

    for callback in callbacks:  # the commit
        callback()

    assert scored_users(acme) == {"ada"}


def test_the_sweep_sends_again_a_refresh_queued_and_lost(acme, eager_tasks, settings):
    settings.SCORING_REFRESH_SECONDS = 10
    apply(acme, track("ada", "Login"))
    lost_at = timezone.now() - timedelta(seconds=11)
    RefreshDemand.objects.create(workspace=acme.workspace, queued_at=lost_at)

    assert tasks.scores_refresh_due() >= 1

    assert scored_users(acme) == {"ada"}
    assert queued_at(acme) is None


def test_the_sweep_leaves_a_refresh_queued_within_the_period(acme, eager_tasks, settings):
    settings.SCORING_REFRESH_SECONDS = 10
    workspace_refresh(workspace_id=acme.workspace.id)
    apply(acme, track("ada", "Login"))
    just_now = timezone.now() - timedelta(seconds=1)
    RefreshDemand.objects.create(workspace=acme.workspace, queued_at=just_now)

    assert tasks.scores_refresh_due() == 0

    assert scored_users(acme) == set()
    assert queued_at(acme) == just_now


def test_the_sweep_scores_events_whose_refresh_was_never_queued(acme, eager_tasks, settings):
    """A drain killed between its commit and queuing: the applied batch is recent activity."""
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    workspace_refresh(workspace_id=acme.workspace.id)
    apply(acme, track("ada", "Login"))  # its on-commit queuing never runs in this test

    assert workspaces_to_sweep() == [acme.workspace.id]
    assert tasks.scores_refresh_due() == 1

    assert scored_users(acme) == {"ada"}


def test_the_sweep_looks_only_at_workspaces_that_changed_or_are_due(acme, settings):
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0

    def sweep_queries(quiet: int) -> int:
        for n in range(quiet):
            _, workspace = product_create(name=f"Quiet {n}")
            workspace_refresh(workspace_id=workspace.id)
        apply(acme, track("ada", "Login"))
        with CaptureQueriesContext(connection) as queries:
            assert workspaces_to_sweep() == [acme.workspace.id]
        return len(queries)

    workspace_refresh(workspace_id=acme.workspace.id)
    with_three = sweep_queries(3)
    with_thirty = sweep_queries(30)

    assert with_thirty == with_three  # 33 scored, quiet workspaces cost no more than 3
    workspace_refresh(workspace_id=acme.workspace.id)
    assert workspaces_to_sweep() == []


def test_a_new_day_and_a_watermark_about_to_outlive_the_activity_are_swept(acme, settings):
    settings.SCORING_ACTIVITY_KEEP_MINUTES = 30
    workspace_refresh(workspace_id=acme.workspace.id)
    state = ScoringState.objects.filter(workspace=acme.workspace)
    assert workspaces_to_sweep() == []

    state.update(scored_through=timezone.now() - timedelta(minutes=16))
    assert workspaces_to_sweep() == [acme.workspace.id]

    state.update(scored_through=timezone.now(), window_end=timezone.now().date() - timedelta(1))
    assert workspaces_to_sweep() == [acme.workspace.id]


def test_changed_marketplace_traits_queue_a_refresh(
    acme, eager_tasks, django_capture_on_commit_callbacks
):
    workspace_refresh(workspace_id=acme.workspace.id)
    before = ScoringState.objects.get(workspace=acme.workspace).refreshed_at

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        account_prefixed_traits_replace(
            product_id=acme.product.id, traits_by_tracking_id={"initech": {"am.tier": 50}}
        )
    with django_capture_on_commit_callbacks(execute=True) as unchanged:
        account_prefixed_traits_replace(
            product_id=acme.product.id, traits_by_tracking_id={"initech": {"am.tier": 50}}
        )

    assert len(callbacks) == 1 and len(unchanged) == 0  # the same traits again: nothing to score
    assert ScoringState.objects.get(workspace=acme.workspace).refreshed_at > before


def test_an_erasure_queues_the_refresh_that_drops_the_erased_score(
    acme, eager_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        apply(acme, track("ada", "Login"), track("grace", "Login"))
    assert scored_users(acme) == {"ada", "grace"}

    with django_capture_on_commit_callbacks(execute=True):
        erase(acme, User.objects.get(product=acme.product, tracking_id="ada"))

    assert scored_users(acme) == {"grace"}


@pytest.mark.postgresql
def test_a_refresh_that_finds_the_last_one_running_is_queued_behind_it(acme, transactional_db):
    workspace_refresh(workspace_id=acme.workspace.id)
    RefreshDemand.objects.create(workspace=acme.workspace, queued_at=timezone.now())

    with other_session() as running:
        running.execute(
            "SELECT 1 FROM engagement_scoringstate WHERE workspace_id = %s FOR UPDATE",
            [acme.workspace.id],
        )
        assert tasks.workspace_refresh(acme.workspace.id) == "busy"
        # Taken as it started, then marked again behind the run holding the row, which sends
        # it as it ends (nothing is sent meanwhile).
        demand = RefreshDemand.objects.get(workspace=acme.workspace)
        assert demand.queued_at is not None
        assert demand.behind_running


@pytest.mark.parametrize("running", ["workspace_refresh", "workspace_rescore"])
def test_a_refresh_queued_behind_the_running_one_is_sent_as_that_one_ends(
    acme, eager_tasks, running
):
    """Not half the running one's last duration later, as before: after a p90 take over a million
    score rows that was seconds with both workers idle while changes waited."""
    apply(acme, track("ada", "Login"))

    def queued_meanwhile(refreshed) -> None:
        refresh_hook_unregister(queued_meanwhile)  # during the first refresh only
        # As a refresh that found this one running leaves it (refresh_demand_busy).
        RefreshDemand.objects.update_or_create(
            workspace=acme.workspace,
            defaults={"queued_at": timezone.now(), "behind_running": True},
        )

    refresh_hook_register(queued_meanwhile)
    try:
        assert getattr(tasks, running)(acme.workspace.id) == "full"
    finally:
        refresh_hook_unregister(queued_meanwhile)

    assert scored_users(acme) == {"ada"}
    assert queued_at(acme) is None  # taken by the refresh sent as the first one ended


def test_a_busy_refresh_sends_itself_when_the_running_one_ended_before_it_was_marked(
    acme, eager_tasks
):
    """The running one looked for a refresh queued behind it just before this one marked
    itself: no run holds the state row now, so this one is sent at once."""
    apply(acme, track("ada", "Login"))

    assert refresh_demand_busy(workspace_id=acme.workspace.id) is True

    assert scored_users(acme) == {"ada"}
    assert queued_at(acme) is None


def test_a_refresh_a_change_queued_is_left_to_its_own_task(acme, eager_tasks):
    apply(acme, track("ada", "Login"))
    just_now = timezone.now()
    RefreshDemand.objects.create(workspace=acme.workspace, queued_at=just_now)

    assert refresh_demand_after(workspace_id=acme.workspace.id) is False

    assert scored_users(acme) == set()
    assert queued_at(acme) == just_now
