"""The score sync: every account's and user's score, change and segments pushed out as traits
through a Segment-compatible HTTP API (Segment's own, RudderStack's data plane, this service's
own /v1/batch), with the official `segment-analytics-python` client: `identify` for users,
`group` for accounts. Only subjects whose values changed since the last successful run are
sent: a score row is rewritten only when its values change (its `computed_at` moves), and
segment joins and leaves are logged with their time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db.models import Q
from django.utils import timezone
from segment.analytics.client import Client

from automations.client import UnsafeTarget, target_check
from automations.models import TraitSync, TraitSyncRun
from engagement.models import (
    AccountScore,
    SegmentMember,
    SegmentMembershipChange,
    UserScore,
    Workspace,
)

logger = logging.getLogger(__name__)
PAGE = 1000
MAX_RETRIES = 3  # the client's own, within a run; a failed run is sent again by the next one
MAX_BACKOFF_SECONDS = 60


def trait_sync_create(
    *,
    workspace: Workspace,
    host: str,
    write_key: str,
    interval_minutes: int = 60,
    prefix: str = "eds_",
) -> TraitSync:
    errors: dict[str, str] = {}
    try:
        target_check(host)
    except UnsafeTarget as exc:
        errors["host"] = exc.message
    if not write_key.strip():
        errors["write_key"] = "a write key is required"
    if interval_minutes < 1:
        errors["interval_minutes"] = "at least 1"
    if not prefix or not prefix.replace("_", "").isalnum():
        errors["prefix"] = "letters, digits and underscores, e.g. eds_"
    if errors:
        raise ValidationError(errors)
    return TraitSync.objects.create(
        workspace=workspace,
        host=host.rstrip("/"),
        write_key=write_key.strip(),
        interval_minutes=interval_minutes,
        prefix=prefix,
    )


def _changed(model, kind: str, sync: TraitSync, since: datetime | None) -> Iterator[list]:
    """The workspace's score rows of subjects changed since `since`, a page at a time (by the
    subject's id, the rows' key within a workspace)."""
    rows = model.objects.filter(workspace_id=sync.workspace_id).select_related(kind)
    if since is not None:
        joined = SegmentMembershipChange.objects.filter(
            segment__workspace_id=sync.workspace_id, at__gt=since
        ).values(f"{kind}_id")
        rows = rows.filter(Q(computed_at__gt=since) | Q(**{f"{kind}_id__in": joined}))
    subject_id = f"{kind}_id"
    last = 0
    while True:
        page = list(rows.filter(**{f"{subject_id}__gt": last}).order_by(subject_id)[:PAGE])
        if not page:
            return
        yield page
        last = getattr(page[-1], subject_id)


def _traits(sync: TraitSync, row, segments: list[str]) -> dict:
    p = sync.prefix
    return {
        f"{p}engagement_score": row.engagement_score,
        f"{p}score_change": row.score_change,
        f"{p}previous_score": row.previous_score,
        f"{p}percentile_rank": row.percentile_rank,
        f"{p}segments": segments,
        f"{p}scored_at": row.computed_at.isoformat(),
    }


def _segments_of(kind: str, ids: list[int], workspace_id: int) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    members = SegmentMember.objects.filter(
        segment__workspace_id=workspace_id, **{f"{kind}_id__in": ids}
    ).values_list(f"{kind}_id", "segment__name")
    for subject_id, name in members.order_by("segment__name"):
        found.setdefault(subject_id, []).append(name)
    return found


def trait_sync_run(*, sync_id: int, now: datetime | None = None) -> TraitSyncRun:
    """Send what changed since the last successful run; the watermark moves only on success."""
    now = now or timezone.now()
    sync = TraitSync.objects.select_related("workspace").get(id=sync_id)
    run = TraitSyncRun.objects.create(sync=sync, started_at=now)
    failures: list[str] = []
    try:
        target_check(sync.host)
        client = Client(
            write_key=sync.write_key,
            host=sync.host,
            on_error=lambda error, batch: failures.append(str(error)[:500]),
            max_retries=MAX_RETRIES,
            max_total_backoff_duration=MAX_BACKOFF_SECONDS,
            timeout=15,
        )
        run.users_sent = _send(client, sync, UserScore, "user", failures)
        run.accounts_sent = _send(client, sync, AccountScore, "account", failures)
        client.join()
    except UnsafeTarget as exc:
        failures.append(exc.message)
    run.finished_at = timezone.now()
    if failures:
        run.status = TraitSyncRun.Status.FAILED
        run.error = "; ".join(sorted(set(failures)))[:2000]
        sync.last_error = run.error
        logger.warning("trait sync %s failed: %s", sync.id, run.error)
    else:
        run.status = TraitSyncRun.Status.OK
        sync.synced_through = now
        sync.last_error = ""
    run.save()
    sync.save(update_fields=["synced_through", "last_error"])
    return run


def _send(client: Client, sync: TraitSync, model, kind: str, failures: list[str]) -> int:
    sent = 0
    for page in _changed(model, kind, sync, sync.synced_through):
        segments = _segments_of(kind, [getattr(r, f"{kind}_id") for r in page], sync.workspace_id)
        for row in page:
            subject = getattr(row, kind)
            traits = _traits(sync, row, segments.get(subject.id, []))
            if kind == "user":
                client.identify(user_id=subject.tracking_id, traits=traits)
            else:
                # An account needs no user: the anonymous id names the sender, not a person.
                client.group(
                    anonymous_id=f"eds-account-{subject.tracking_id}",
                    group_id=subject.tracking_id,
                    traits=traits,
                )
            sent += 1
        client.flush()  # a page at a time: the client's queue never holds a million calls
        if failures:
            break
    return sent


def trait_syncs_due(*, now: datetime | None = None) -> list[int]:
    """The enabled syncs whose interval has passed since their last run."""
    now = now or timezone.now()
    due = []
    for sync in TraitSync.objects.filter(enabled=True).order_by("id"):
        last = sync.runs.order_by("-started_at").values_list("started_at", flat=True).first()
        if last is None or now - last >= timedelta(minutes=sync.interval_minutes):
            due.append(sync.id)
    return due
