"""Celery tasks of the engagement domain: each loads by id and calls a service."""

import logging
import time

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from engagement import event_store, history, metrics, scoring, segments, services
from engagement.erasure import ErasureDeferred, erasure_run, erasures_stalled_requeue
from engagement.models import Segment, Workspace
from engagement.segments import segment_refresh
from engagement.stored_json import with_json_as_text

logger = logging.getLogger(__name__)


def _workspaces():
    """Every workspace, its account filter read as text (engagement.stored_json): one stored
    past the checks, nested beyond json.loads, cannot stop the ticks of every workspace."""
    return with_json_as_text(Workspace.objects.all(), "account_filter").order_by("id")


@shared_task(ignore_result=True)
def scores_refresh_due() -> int:
    """Periodic, the sweep behind refreshes on demand (engagement/scoring/demand.py): send again
    the refreshes queued a period ago and never started; queue one for each workspace that a
    check finds due among those that changed or whose day or watermark is due; and one history
    update per workspace where late events noted a past day (so the stored history shows them
    within a period or two, not at the history's next minute). Its queries grow with the
    workspaces found, not with all of them."""
    queued = len(scoring.refresh_demands_stale_requeue())
    workspaces = _workspaces().filter(id__in=scoring.workspaces_to_sweep())
    due = [w.id for w in workspaces if scoring.workspace_refresh_is_due(workspace=w)]
    queued += len(scoring.refresh_demand_note(workspace_ids=due))
    expires = settings.SCORING_REFRESH_SECONDS * 3
    for workspace_id in history.score_history_backfill_workspaces():
        if history.score_history_backfill_is_due(workspace_id=workspace_id):
            # Returns "busy" at once while another update runs; the noted day waits for the next.
            score_history_update.apply_async(args=(workspace_id,), expires=expires)
            queued += 1
    return queued


@shared_task(ignore_result=True)
def workspace_refresh(workspace_id: int) -> str:
    """A refresh queued on demand (or by the sweep): incremental, or a full rescore when the day
    or the settings changed. Found busy, it is queued behind the running one
    (demand.refresh_demand_busy)."""
    if not Workspace.objects.filter(id=workspace_id).exists():
        return "gone"
    queued_at = scoring.refresh_demand_take(workspace_id=workspace_id)
    started = time.perf_counter()
    if queued_at is not None:
        waited = (timezone.now() - queued_at).total_seconds()
        metrics.SCORE_REFRESH_WAIT_SECONDS.observe(max(waited, 0.0))
    return _refresh_ended(scoring.workspace_refresh(workspace_id=workspace_id), started)


@shared_task(ignore_result=True)
def workspace_rescore(workspace_id: int) -> str:
    """Full rescore: the workspace's settings or weights were changed."""
    if not Workspace.objects.filter(id=workspace_id).exists():
        return "gone"
    started = time.perf_counter()
    return _refresh_ended(scoring.workspace_rescore(workspace_id=workspace_id), started)


def _refresh_ended(result: scoring.RefreshResult, started: float) -> str:
    """After a refresh or a rescore: one that found another running is queued behind it; one
    that ran sends the refresh queued behind it, if any; either is timed."""
    if result.mode == "busy":
        scoring.refresh_demand_busy(workspace_id=result.workspace_id)
    else:
        scoring.refresh_demand_after(workspace_id=result.workspace_id)
    metrics.score_refresh_observed(result, time.perf_counter() - started)
    return result.mode


@shared_task(ignore_result=True)
def segment_members_refresh(segment_id: int) -> int:
    """A segment was created or its conditions changed: recompute its members now."""
    segment = Segment.objects.filter(id=segment_id).first()
    if segment is None:
        return 0
    joined, _ = segment_refresh(segment=segment)
    return joined


@shared_task(ignore_result=True)
def segment_changes_purge() -> int:
    """Periodic (hourly): forget segment joins and leaves past SEGMENT_CHANGES_RETENTION_DAYS."""
    return segments.segment_changes_purge()


@shared_task(ignore_result=True)
def event_tallies_compact() -> int:
    """Periodic (hourly): fold the overview's appended event tallies, one row per day and name."""
    return event_store.event_tallies_compact()


@shared_task(ignore_result=True)
def event_activity_purge() -> int:
    """Periodic (every minute): forget applied batches older than SCORING_ACTIVITY_KEEP_MINUTES."""
    return services.event_activity_purge()


@shared_task(ignore_result=True)
def event_partitions_maintain() -> dict[str, int]:
    """Periodic (hourly): partitions for the days ahead, retention for the days behind."""
    return services.event_partitions_maintain()


@shared_task(ignore_result=True)
def event_rollups_order() -> dict[str, int]:
    """Periodic (hourly): the rollups of the days that ended stored again by account and user."""
    return services.event_rollups_order()


@shared_task(ignore_result=True)
def score_history_due() -> int:
    """Periodic (every minute): one history update per workspace never built, whose day ended,
    whose settings changed, or with late events noted (scores_refresh_due queues those first)."""
    queued = 0
    for workspace in _workspaces():
        if history.score_history_is_due(workspace=workspace):
            # A queued update is pointless after the next tick has queued another.
            score_history_update.apply_async(args=(workspace.id,), expires=120)
            queued += 1
    return queued


@shared_task(ignore_result=True)
def score_history_update(workspace_id: int) -> str:
    """Store the days of score history that ended or changed since the last update."""
    if not Workspace.objects.filter(id=workspace_id).exists():
        return "gone"
    return history.score_history_update(workspace_id=workspace_id).mode


# The pause before each retry of an erasure that met transient failures: doubling, at most a
# minute. A retry is never given up: the erasure stays `running` until it completes.
ERASURE_RETRY_MAX_SECONDS = 60


def erasure_retry_seconds(retries: int) -> int:
    return min(2 ** min(retries, 6), ERASURE_RETRY_MAX_SECONDS)


@shared_task(bind=True, ignore_result=True, max_retries=None)
def erasure_run_task(self, erasure_id: int) -> str:
    """Erase the user or account of a pending erasure request; after transient failures (a
    deadlock, a lost connection), again later, for as long as it takes."""
    try:
        done = erasure_run(erasure_id=erasure_id)
    except ErasureDeferred as deferred:
        countdown = erasure_retry_seconds(self.request.retries)
        logger.warning("erasure %s deferred; retrying in %s s", erasure_id, countdown)
        raise self.retry(exc=deferred, countdown=countdown, max_retries=None) from deferred
    return "skipped" if done is None else done.status


@shared_task(ignore_result=True)
def erasures_stalled_requeue_task() -> int:
    """Queue again the erasures whose task was lost (engagement.erasure)."""
    return erasures_stalled_requeue()
