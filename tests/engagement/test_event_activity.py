"""Which applied batches an incremental refresh reads (EventActivity), how long they are kept,
and what happens to a workspace whose watermark is older than that."""

from datetime import date, timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone

from engagement.models import (
    Account,
    EventActivity,
    EventRollup,
    Membership,
    ScoringState,
    User,
    UserScore,
)
from engagement.scoring import workspace_refresh, workspace_refresh_is_due
from engagement.services import event_activity_purge
from engagement.tasks import event_activity_purge as event_activity_purge_task
from tests.conftest import other_session
from tests.engagement.helpers import apply, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def test_each_applied_batch_records_its_users_and_accounts_once(acme):
    apply(acme, track("u1", "Login", times=3, account="A"), track("u2", "Login"))

    activity = EventActivity.objects.get(product=acme.product)
    users = dict(User.objects.values_list("tracking_id", "id"))
    assert sorted(activity.user_ids) == sorted([users["u1"], users["u2"]])
    assert activity.account_ids == [EventRollup.objects.get(user_id=users["u1"]).account_id]


def test_the_purge_forgets_batches_older_than_the_keep_window(acme, settings):
    settings.SCORING_ACTIVITY_KEEP_MINUTES = 30
    apply(acme, track("u1", "Login"))
    apply(acme, track("u2", "Login"))
    old = EventActivity.objects.order_by("id").first()
    EventActivity.objects.filter(id=old.id).update(
        applied_at=timezone.now() - timedelta(minutes=31)
    )

    assert event_activity_purge() == 1
    assert event_activity_purge_task() == 0
    assert EventActivity.objects.count() == 1
    assert "engagement.tasks.event_activity_purge" in {
        entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()
    }


def test_a_watermark_older_than_the_kept_activity_means_a_full_rescore(acme, settings):
    settings.SCORING_ACTIVITY_KEEP_MINUTES = 30
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    apply(acme, track("u1", "Login"))
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "full"
    ScoringState.objects.filter(workspace=acme.workspace).update(
        scored_through=timezone.now() - timedelta(minutes=31)
    )

    assert workspace_refresh_is_due(workspace=acme.workspace)
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "full"


def test_an_idle_workspace_is_refreshed_before_its_watermark_outlives_the_activity(acme, settings):
    settings.SCORING_ACTIVITY_KEEP_MINUTES = 30
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    apply(acme, track("u1", "Login"))
    workspace_refresh(workspace_id=acme.workspace.id)
    assert not workspace_refresh_is_due(workspace=acme.workspace)
    # As if all that happened 20 minutes ago, and the last refresh 16 minutes ago.
    long_ago = timezone.now() - timedelta(minutes=20)
    EventActivity.objects.update(applied_at=long_ago)
    User.objects.update(created_at=long_ago, updated_at=long_ago)
    ScoringState.objects.filter(workspace=acme.workspace).update(
        scored_through=timezone.now() - timedelta(minutes=16)
    )

    # Nothing changed, but half the keep window has passed: an idle refresh moves the watermark.
    assert workspace_refresh_is_due(workspace=acme.workspace)
    before = timezone.now()
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "idle"
    assert ScoringState.objects.get(workspace=acme.workspace).scored_through >= before
    assert not workspace_refresh_is_due(workspace=acme.workspace)


@pytest.mark.postgresql
def test_adding_to_a_rollup_rewrites_no_index(acme):
    """No indexed column changes, and the page has room: a HOT update on PostgreSQL."""
    apply(acme, track("u1", "Login"))
    apply(acme, track("u1", "Login"))

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_stat_get_xact_tuples_updated(c.oid), "
            "pg_stat_get_xact_tuples_hot_updated(c.oid) "
            "FROM pg_class c WHERE c.relname = 'engagement_eventrollup'"
        )
        updated, hot = cursor.fetchone()
    assert EventRollup.objects.get().count == 2
    assert (updated, hot) == (1, 1)


@pytest.mark.postgresql
def test_a_change_committed_after_a_refresh_read_is_scored_by_the_next(
    acme, transactional_db, settings
):
    """The watermark stops at the start of the oldest transaction still writing: a change it
    stamped before the refresh, committed after, is read by the next refresh with no overlap."""
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    apply(acme, track("ada", "Login"), track("grace", "Login"))
    workspace_refresh(workspace_id=acme.workspace.id)

    with other_session() as writer:
        writer.execute(
            'UPDATE engagement_user SET traits = \'{"createdAt": "2020-01-01"}\','
            " updated_at = clock_timestamp() WHERE tracking_id = 'grace'"
        )
        started = writer.execute("SELECT now()").fetchone()[0]
        assert workspace_refresh(workspace_id=acme.workspace.id).mode == "idle"  # not visible yet
        assert ScoringState.objects.get(workspace=acme.workspace).scored_through <= started
    # The writer's transaction commits as the block ends.

    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "incremental"
    grace = UserScore.objects.get(workspace=acme.workspace, user__tracking_id="grace")
    assert grace.tenure_days == (timezone.now().date() - date(2020, 1, 1)).days


@pytest.mark.postgresql
def test_a_refresh_rereads_only_changes_stamped_within_the_clock_margin(acme, settings):
    """Where the watermark waits for open transactions, the re-read covers the machines' clock
    skew (INGESTION_HOSTS_CLOCK_SKEW_MS) and a stamp's lead on its write, no more: a change
    stamped a second before the watermark was read by the refresh that set it."""
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 30
    settings.INGESTION_HOSTS_CLOCK_SKEW_MS = 250
    apply(acme, track("ada", "Login"), track("grace", "Login"), track("linus", "Login"))
    workspace_refresh(workspace_id=acme.workspace.id)
    watermark = ScoringState.objects.get(workspace=acme.workspace).scored_through
    an_hour = timedelta(hours=1)
    EventActivity.objects.update(applied_at=F("applied_at") - an_hour)
    User.objects.update(updated_at=F("updated_at") - an_hour)
    Account.objects.update(updated_at=F("updated_at") - an_hour)
    Membership.objects.update(created_at=F("created_at") - an_hour)
    # grace's traits changed on a host whose clock runs 300 ms behind the refresh's; linus's a
    # second before the watermark, which the refresh read.
    User.objects.filter(tracking_id="grace").update(
        traits={"plan": "pro"}, updated_at=watermark - timedelta(milliseconds=300)
    )
    User.objects.filter(tracking_id="linus").update(
        traits={"plan": "pro"}, updated_at=watermark - timedelta(seconds=1)
    )

    refreshed = workspace_refresh(workspace_id=acme.workspace.id)

    assert (refreshed.mode, refreshed.users) == ("incremental", 1)
