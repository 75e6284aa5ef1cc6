"""Refresh on demand: a change to a product's scoring inputs queues a refresh of its workspaces.

Whatever applies events, traits or links (`messages_apply`, the marketplace's account traits, an
erasure) asks, once its transaction has committed, for its product's workspaces to be refreshed
(`scores_refresh_soon`). Each workspace has at most one refresh queued (`RefreshDemand.queued_at`
set) and at most one running (its ScoringState row held, see locks):

- a change finds no refresh queued: it marks one queued and sends the task, which starts
  SCORING_REFRESH_DELAY_MS later, so the changes of that while are scored together;
- a change finds one queued: that refresh will read it, nothing more is sent;
- the refresh, as it starts, clears the mark (committed before it reads anything), so a change
  from then on queues the next one; a refresh that finds the previous one still running is
  queued behind it, and the running one sends it as soon as it ends.

Under a steady stream of changes, refreshes run back to back, each scoring what arrived while the
one before ran. Beat's sweep (engagement.tasks.scores_refresh_due) catches what a lost broker
message or a killed process left: a mark older than a refresh period is queued again, and the
workspaces whose products applied events in the last two periods, or whose day or watermark is
due, are checked. Its cost grows with the workspaces that changed, not with all of them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from engagement.models import EventActivity, RefreshDemand, ScoringState, Workspace
from engagement.scoring.locks import workspace_state_free


def scores_refresh_soon(*, product_id: int) -> None:
    """Once the current transaction commits (at once outside one), queue a refresh of the
    product's workspaces that have none queued. A failure to queue is logged, never raised: the
    change is stored, and the sweep queues its refresh within two refresh periods."""
    transaction.on_commit(
        functools.partial(refresh_demand_note, product_ids=[product_id]), robust=True
    )


def refresh_demand_note(
    *, product_ids: Iterable[int] = (), workspace_ids: Iterable[int] = ()
) -> list[int]:
    """Queue a refresh of these products' workspaces and of these workspaces, each that has none
    queued; returns the workspaces queued now."""
    wanted = set(workspace_ids)
    products = set(product_ids)
    if products:
        of_products = Workspace.objects.filter(product_id__in=products)
        wanted.update(of_products.values_list("id", flat=True))
    queued = [workspace_id for workspace_id in sorted(wanted) if _queue_if_none(workspace_id)]
    for workspace_id in queued:
        _send(workspace_id, delay=settings.SCORING_REFRESH_DELAY_MS / 1000)
    return queued


def refresh_demand_take(*, workspace_id: int) -> datetime | None:
    """A refresh of the workspace starts: clear its queued mark, so that any change from now on
    queues the next refresh; returns when the mark was set (None: none was)."""
    queued_at = (
        RefreshDemand.objects.filter(workspace_id=workspace_id)
        .values_list("queued_at", flat=True)
        .first()
    )
    if queued_at is not None:
        RefreshDemand.objects.filter(workspace_id=workspace_id, queued_at=queued_at).update(
            queued_at=None, behind_running=False
        )
    return queued_at


def refresh_demand_busy(*, workspace_id: int) -> bool:
    """The refresh found the one before it still running, which may have read its data before the
    changes this one was queued for: queue this one behind it, for the running one to send as it
    commits (refresh_demand_after). Sent here when the running one ended meanwhile (it may have
    looked before the mark was set); should it die without sending, the sweep sends it again
    (refresh_demands_stale_requeue). True when it was sent here.

    Until 2026-11-29 it was sent again after half the last refresh's duration instead: after an
    unusually long refresh (a p90 take over every score row, a cold cache) that left the workers
    idle for seconds while changes waited (docs/benchmarks.md)."""
    _queue_if_none(workspace_id)
    RefreshDemand.objects.filter(workspace_id=workspace_id, queued_at__isnull=False).update(
        behind_running=True
    )
    # Marked first, looked second; the running refresh commits first, looks second: one of
    # the two sees the other.
    if not workspace_state_free(ScoringState, workspace_id):
        return False
    return refresh_demand_after(workspace_id=workspace_id)


def refresh_demand_after(*, workspace_id: int) -> bool:
    """A refresh of the workspace ended: send the refresh queued behind it, if one is (each is
    sent once: whoever clears the mark's `behind_running` sends it). True when it was sent."""
    behind = RefreshDemand.objects.filter(
        workspace_id=workspace_id, queued_at__isnull=False, behind_running=True
    )
    if not behind.update(behind_running=False):
        return False
    _send(workspace_id, delay=0)
    return True


def refresh_demands_stale_requeue(*, now: datetime | None = None) -> list[int]:
    """Send again the refreshes queued more than a refresh period ago and never started (a lost
    broker message, a worker killed with the task); returns their workspaces."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.SCORING_REFRESH_SECONDS)
    requeued = []
    stale = RefreshDemand.objects.filter(queued_at__lt=cutoff).values_list(
        "workspace_id", "queued_at"
    )
    for workspace_id, queued_at in stale:
        # Only if no refresh took the mark meanwhile.
        if RefreshDemand.objects.filter(workspace_id=workspace_id, queued_at=queued_at).update(
            queued_at=now
        ):
            _send(workspace_id, delay=0)
            requeued.append(workspace_id)
    return requeued


def workspaces_to_sweep(*, now: datetime | None = None) -> list[int]:
    """The workspaces the sweep checks (engagement.scoring.changes.workspace_refresh_is_due):
    never scored; scored for an earlier day; with a watermark half the kept activity old (an idle
    refresh moves it on before the activity it needs is purged); whose p90 lags (taken
    SCORING_P90_SECONDS ago, scores written since); or whose product applied events in the last
    two refresh periods (a refresh the applying process could not queue). Two queries, whatever
    the number of workspaces, then one per product found: their cost grows with those found."""
    now = now or timezone.now()
    today = timezone.localdate(now, timezone=timezone.get_fixed_timezone(0))
    idle_since = now - timedelta(minutes=settings.SCORING_ACTIVITY_KEEP_MINUTES) * 0.5
    p90_since = now - timedelta(seconds=settings.SCORING_P90_SECONDS)
    due = Workspace.objects.filter(
        Q(scoring_state__isnull=True)
        | Q(scoring_state__scored_through__isnull=True)
        | Q(scoring_state__window_end__lt=today)
        | Q(scoring_state__scored_through__lt=idle_since)
        # p90 lags (engagement.scoring.ranks.p90_lags): due, and scores written since it was taken
        | Q(scoring_state__p90_at__isnull=True)
        | Q(
            scoring_state__p90_at__lte=p90_since,
            scoring_state__refreshed_at__gt=F("scoring_state__p90_at"),
        )
    ).values_list("id", flat=True)
    recent = now - timedelta(seconds=2 * settings.SCORING_REFRESH_SECONDS)
    applied = (
        EventActivity.objects.filter(applied_at__gt=recent)
        .values("product_id")
        .annotate(latest=Max("applied_at"))
    )
    changed: set[int] = set()
    for row in applied:
        changed.update(
            Workspace.objects.filter(product_id=row["product_id"])
            .exclude(scoring_state__scored_through__gte=row["latest"])
            .values_list("id", flat=True)
        )
    return sorted(set(due) | changed)


def _queue_if_none(workspace_id: int) -> bool:
    """Mark a refresh of the workspace queued unless one is: whether this call marked it."""
    now = timezone.now()
    if RefreshDemand.objects.filter(workspace_id=workspace_id, queued_at__isnull=True).update(
        queued_at=now
    ):
        return True
    if RefreshDemand.objects.filter(workspace_id=workspace_id).exists():
        return False  # queued already
    try:
        with transaction.atomic():
            RefreshDemand.objects.create(workspace_id=workspace_id, queued_at=now)
    except IntegrityError:
        return False  # another process marked it first (or the workspace is gone)
    return True


def _send(workspace_id: int, *, delay: float) -> None:
    from engagement.tasks import workspace_refresh

    workspace_refresh.apply_async(args=(workspace_id,), countdown=delay)
