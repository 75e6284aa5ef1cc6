"""The score sync: every account's and user's score, change and segments pushed out as traits
through a Segment-compatible HTTP API (Segment's own, RudderStack's data plane, this service's
own /v1/batch): `identify` for users, `group` for accounts, sent as Segment's HTTP batch call
(`POST {host}/v1/batch`) through automations.client, so every request's address is resolved,
checked and pinned, and a redirect is a failure, never followed. Only subjects whose values
changed since the last successful run are sent: a score row is rewritten only when its values
change (its `computed_at` moves), and segment joins and leaves are logged with their time.

A switched-off sync does not run: a run checks the switch under the sync's row lock when it
starts, and again before every request, so switching off stops a run before its next batch.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from automations.client import (
    DeliveryError,
    DeliveryResponse,
    UnsafeTarget,
    is_retryable,
    post_json,
    target_check,
)
from automations.models import TraitSync, TraitSyncRun
from engagement.input_rules import text_fault, whole_fault
from engagement.models import (
    AccountScore,
    SegmentMember,
    SegmentMembershipChange,
    UserScore,
    Workspace,
)
from engagement.selectors import score_percentile_ranks

logger = logging.getLogger(__name__)
PAGE = 1000  # score rows read at a time
# Segment's batch call takes up to 500 KB; like its own libraries, stay below with room for
# the envelope, and send at most 100 messages a request.
BATCH_MESSAGES = 100
BATCH_BYTES = 475_000
# A batch answered 429 or 5xx, or not answered, is sent again after each of these waits within
# the run; a run that still fails is sent again by the next one (the watermark stays).
RETRY_WAITS_SECONDS: tuple[float, ...] = (1.0, 5.0, 30.0)
MAX_HOST_LENGTH = 500
MAX_WRITE_KEY_LENGTH = 500
MAX_INTERVAL_MINUTES = 525_600  # a year
MAX_PREFIX_LENGTH = 32
LIBRARY = {"name": "eds-trait-sync", "version": "1"}


def trait_sync_faults(
    *, host: object, write_key: object, interval_minutes: object, prefix: object
) -> dict[str, str]:
    """Every fault of a score sync's settings, by field; empty when they may be saved."""
    faults: dict[str, str] = {}
    host_fault = text_fault(host, max_length=MAX_HOST_LENGTH, what="a URL")
    if host_fault is None:
        assert isinstance(host, str)
        try:
            target_check(host.strip())
        except UnsafeTarget as exc:
            host_fault = exc.message
        else:
            if urlsplit(host.strip()).query or "#" in host:
                host_fault = "the API's base URL, without ?query or #fragment"
    if host_fault:
        faults["host"] = host_fault
    key_fault = text_fault(write_key, max_length=MAX_WRITE_KEY_LENGTH, what="a write key")
    if key_fault:
        faults["write_key"] = key_fault
    interval_fault = whole_fault(interval_minutes, least=1, most=MAX_INTERVAL_MINUTES)
    if interval_fault:
        faults["interval_minutes"] = interval_fault
    prefix_fault = text_fault(prefix, max_length=MAX_PREFIX_LENGTH, what="a prefix")
    if prefix_fault is None and not str(prefix).replace("_", "").isalnum():
        prefix_fault = "letters, digits and underscores, e.g. eds_"
    if prefix_fault:
        faults["prefix"] = prefix_fault
    return faults


def trait_sync_create(
    *,
    workspace: Workspace,
    host: str,
    write_key: str,
    interval_minutes: int = 60,
    prefix: str = "eds_",
) -> TraitSync:
    """A new score sync; every fault of its settings at once as a ValidationError, and then
    nothing is written."""
    faults = trait_sync_faults(
        host=host, write_key=write_key, interval_minutes=interval_minutes, prefix=prefix
    )
    if faults:
        raise ValidationError(faults)
    return TraitSync.objects.create(
        workspace=workspace,
        host=host.strip().rstrip("/"),
        write_key=write_key.strip(),
        interval_minutes=interval_minutes,
        prefix=prefix,
    )


def trait_sync_switch(*, sync: TraitSync, enabled: bool) -> TraitSync:
    """Switch a score sync on or off. Off: once this commits, no run starts, and a run under
    way stops before its next request."""
    sync.enabled = enabled
    sync.save(update_fields=["enabled"])
    return sync


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


def _traits(sync: TraitSync, row, segments: list[str], rank: float | None) -> dict:
    p = sync.prefix
    return {
        f"{p}engagement_score": row.engagement_score,
        f"{p}score_change": row.score_change,
        f"{p}previous_score": row.previous_score,
        f"{p}percentile_rank": rank,
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


def _message(sync: TraitSync, kind: str, row, segments: list[str], rank: float | None) -> dict:
    """Segment's identify (a user) or group (an account) call of one score row, whose score
    ranks at the percentile `rank`."""
    subject = getattr(row, kind)
    common = {
        "traits": _traits(sync, row, segments, rank),
        "messageId": str(uuid.uuid4()),
        "timestamp": timezone.now().isoformat(),
        "context": {"library": LIBRARY},
    }
    if kind == "user":
        return {"type": "identify", "userId": subject.tracking_id, **common}
    # An account needs no user: the anonymous id names the sender, not a person.
    return {
        "type": "group",
        "anonymousId": f"eds-account-{subject.tracking_id}",
        "groupId": subject.tracking_id,
        **common,
    }


class RunStopped(Exception):
    """A run that cannot go on: what the run's record and the sync's last error say."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _still_on(sync_id: int) -> bool:
    return TraitSync.objects.filter(id=sync_id, enabled=True).exists()


def _post_batch(sync: TraitSync, messages: list[str]) -> None:
    """POST one batch (messages already encoded), sent again on 429, 5xx, a timeout or a lost
    connection after each of RETRY_WAITS_SECONDS; RunStopped when it cannot be delivered."""
    url = f"{sync.host}/v1/batch"
    credential = base64.b64encode(f"{sync.write_key}:".encode()).decode("ascii")
    headers = {"Authorization": f"Basic {credential}", "User-Agent": "eds-trait-sync/1"}
    host = urlsplit(url).hostname
    waits = [*RETRY_WAITS_SECONDS, None]
    for wait in waits:
        if not _still_on(sync.id):
            raise RunStopped("the sync was switched off; the run stopped before its next batch")
        sent_at = json.dumps(timezone.now().isoformat())
        body = f'{{"batch": [{", ".join(messages)}], "sentAt": {sent_at}}}'.encode()
        try:
            response: DeliveryResponse = post_json(url, body, headers)
        except DeliveryError as exc:
            if not exc.transient or wait is None:
                raise RunStopped(exc.message) from None
            logger.info("trait sync %s: %s; sending again in %s s", sync.id, exc.message, wait)
        else:
            if response.ok:
                return
            if 300 <= response.status_code < 400:
                raise RunStopped(
                    f"{host} answered {response.status_code}, a redirect: not followed"
                )
            if not is_retryable(response.status_code) or wait is None:
                shown = response.body_excerpt[:200]
                raise RunStopped(f"{host} answered {response.status_code}: {shown}")
            logger.info("trait sync %s: %s answered %s", sync.id, host, response.status_code)
        time.sleep(wait)


def _send(sync: TraitSync, model, kind: str) -> Iterator[int]:
    """Send the subjects of one kind that changed since the watermark; yields how many each
    delivered batch held (so a run that stops still says how many went out)."""
    batch: list[str] = []
    size = 0
    ranks = score_percentile_ranks(workspace_id=sync.workspace_id, kind=kind)
    for page in _changed(model, kind, sync, sync.synced_through):
        segments = _segments_of(kind, [getattr(r, f"{kind}_id") for r in page], sync.workspace_id)
        for row in page:
            shown = segments.get(getattr(row, f"{kind}_id"), [])
            message = _message(sync, kind, row, shown, ranks[row.engagement_score])
            encoded = json.dumps(message, cls=DjangoJSONEncoder)
            if batch and (len(batch) >= BATCH_MESSAGES or size + len(encoded) > BATCH_BYTES):
                _post_batch(sync, batch)
                yield len(batch)
                batch, size = [], 0
            batch.append(encoded)
            size += len(encoded) + 2  # ASCII (json.dumps escapes the rest), and ", "
    if batch:
        _post_batch(sync, batch)
        yield len(batch)


def _run_started(sync_id: int, now: datetime) -> tuple[TraitSync, TraitSyncRun] | None:
    """The sync and its new run, or None when it is gone or switched off. Read under the sync's
    row lock: a switch-off that committed first is seen, one that comes later waits for the
    run to be recorded and is then seen before the first request."""
    with transaction.atomic():
        sync = TraitSync.objects.select_for_update().filter(id=sync_id).first()
        if sync is None or not sync.enabled:
            return None
        return sync, TraitSyncRun.objects.create(sync=sync, started_at=now)


def trait_sync_run(*, sync_id: int, now: datetime | None = None) -> TraitSyncRun | None:
    """Send what changed since the last successful run; the watermark moves only on success.
    None, and nothing sent, for a sync that is switched off (or gone)."""
    now = now or timezone.now()
    started = _run_started(sync_id, now)
    if started is None:
        logger.info("trait sync %s is switched off or gone: not run", sync_id)
        return None
    sync, run = started
    error = ""
    try:
        for sent in _send(sync, UserScore, "user"):
            run.users_sent += sent
        for sent in _send(sync, AccountScore, "account"):
            run.accounts_sent += sent
    except RunStopped as exc:
        error = exc.message
    run.finished_at = timezone.now()
    if error:
        run.status = TraitSyncRun.Status.FAILED
        run.error = error[:2000]
        sync.last_error = run.error
        logger.warning("trait sync %s failed: %s", sync.id, run.error)
    else:
        run.status = TraitSyncRun.Status.OK
        sync.synced_through = now
        sync.last_error = ""
    run.save()
    sync.save(update_fields=["synced_through", "last_error"])
    return run


def trait_syncs_due(*, now: datetime | None = None) -> list[int]:
    """The enabled syncs whose interval has passed since their last run."""
    now = now or timezone.now()
    due = []
    for sync in TraitSync.objects.filter(enabled=True).order_by("id"):
        last = sync.runs.order_by("-started_at").values_list("started_at", flat=True).first()
        if last is None or now - last >= timedelta(minutes=sync.interval_minutes):
            due.append(sync.id)
    return due
