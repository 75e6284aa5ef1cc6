"""Sending a delivery: one attempt at a time, at least once, on the retry schedule, on record.

An attempt takes a lease on the delivery in a short transaction, sends outside any transaction,
then records the attempt and what comes next. A worker killed mid-send leaves the lease to
expire; the sweep (tasks.deliveries_due) then sends the delivery again with the same webhook-id,
so a receiver that got it drops the repeat.

Disabled means stopped: an attempt starts when its lease commits, and the lease reads the
automation's `enabled` under the row lock a switch-off takes, so none starts after a switch-off
has committed; the sweep leaves switched-off automations alone.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Min
from django.utils import timezone

from automations import payloads
from automations.client import (
    DEADLINE_SECONDS,
    DeliveryError,
    DeliveryResponse,
    is_retryable,
    post_json,
)
from automations.models import Automation, Delivery, DeliveryAttempt
from automations.services import automation_switch_off
from automations.signing import signature_headers
from automations.slack import slack_digest_message, slack_message

logger = logging.getLogger(__name__)
_PENDING = (Delivery.Status.PENDING, Delivery.Status.RETRYING)
# How long an attempt may take, answer included (tests shorten it).
ATTEMPT_DEADLINE_SECONDS = DEADLINE_SECONDS


@dataclass(frozen=True, slots=True)
class Outcome:
    status_code: int | None
    latency_ms: int
    excerpt: str
    error: str
    delivered: bool
    retryable: bool


def _lease(delivery_id: str, now: datetime) -> Delivery | None:
    """The delivery, leased to this attempt; None when it is done, not due or in flight. The
    automation's row is locked first, as automations.services.automation_switch_off locks it,
    and `enabled` read under that lock: a lease either commits before a switch-off (the attempt
    has started; the switch-off cancels what comes after it) or sees the automation off and
    cancels the delivery instead. So no attempt starts once a switch-off has committed."""
    with transaction.atomic():
        automation_id = (
            Delivery.objects.filter(id=delivery_id).values_list("automation_id", flat=True).first()
        )
        if automation_id is None:
            return None
        automation = (
            Automation.objects.select_for_update(of=("self",), no_key=True)
            .select_related("workspace", "segment")
            .get(id=automation_id)
        )
        delivery = Delivery.objects.select_for_update().filter(id=delivery_id).first()
        if delivery is None or delivery.status not in _PENDING:
            return None
        if not automation.enabled:
            # Made by a refresh that read the automation just before its switch-off committed.
            delivery.status = Delivery.Status.CANCELLED
            delivery.finished_at = now
            delivery.save(update_fields=["status", "finished_at"])
            return None
        if delivery.lease_until and delivery.lease_until > now:
            return None
        if delivery.next_attempt_at and delivery.next_attempt_at > now:
            return None
        delivery.automation = automation
        delivery.lease_until = now + timedelta(seconds=settings.AUTOMATION_LEASE_SECONDS)
        delivery.save(update_fields=["lease_until"])
        return delivery


def request_of(delivery: Delivery, now: datetime) -> tuple[bytes, dict[str, str]]:
    """The body and headers of an attempt: signed JSON for a webhook, a message for Slack."""
    automation = delivery.automation
    if automation.destination == Automation.Destination.SLACK and payloads.is_digest(
        delivery.event_type
    ):
        data = delivery.payload["data"]
        message = slack_digest_message(
            event_type=delivery.event_type,
            kind=automation.subject_kind,
            count=data["count"],
            automation_name=data["automation"]["name"],
            subjects_url=data["subjects_url"],
        )
        return json.dumps(message).encode(), {}
    if automation.destination == Automation.Destination.SLACK:
        subject = delivery.payload["data"].get(automation.subject_kind) or {
            "name": automation.name,
            "engagement_score": None,
            "score_change": None,
            "_links": {"dashboard": settings.PUBLIC_URL},
        }
        what = (
            "test message from the engagement data service"
            if delivery.event_type == payloads.TEST_EVENT
            else payloads.what_happened(automation, subject)
        )
        message = slack_message(
            event_type=delivery.event_type,
            subject=subject,
            what=what,
            dashboard_url=subject["_links"]["dashboard"],
        )
        return json.dumps(message).encode(), {}
    text = json.dumps(delivery.payload, separators=(",", ":"))
    secrets_in_use = [automation.secret]
    if automation.previous_secret and (automation.previous_secret_until or now) > now:
        secrets_in_use.append(automation.previous_secret)
    headers = signature_headers(
        msg_id=delivery.id, timestamp=now, body=text, secrets_in_use=secrets_in_use
    )
    return text.encode(), headers


def _elapsed_ms(started: float) -> int:
    """Milliseconds since `started` (time.monotonic()), rounded up: an attempt that took any
    time at all never shows 0."""
    return math.ceil((time.monotonic() - started) * 1000)


def _send(delivery: Delivery, now: datetime) -> Outcome:
    """One attempt; its latency is the time the whole call took, measured here, whatever the
    outcome (a timeout, a refused connection or target, an answer)."""
    body, headers = request_of(delivery, now)
    started = time.monotonic()
    try:
        response: DeliveryResponse = post_json(
            delivery.automation.url, body, headers, timeout=ATTEMPT_DEADLINE_SECONDS
        )
    except DeliveryError as exc:
        return Outcome(None, _elapsed_ms(started), "", exc.message, False, exc.transient)
    return Outcome(
        status_code=response.status_code,
        latency_ms=_elapsed_ms(started),
        excerpt=response.body_excerpt,
        error="" if response.ok else f"answered {response.status_code}",
        delivered=response.ok,
        retryable=not response.ok and is_retryable(response.status_code),
    )


def delivery_attempt(*, delivery_id: str, now: datetime | None = None) -> float | None:
    """Make one attempt if the delivery is due; returns the seconds until the next attempt, or
    None when there is none to schedule (done, failed, not due, or in flight elsewhere)."""
    now = now or timezone.now()
    delivery = _lease(delivery_id, now)
    if delivery is None:
        return None
    outcome = _send(delivery, now)
    return _record(delivery, outcome, now)


def _record(delivery: Delivery, outcome: Outcome, now: datetime) -> float | None:
    """Record the attempt and what comes next. A delivery cancelled while its attempt was in
    flight stays cancelled (nothing is scheduled), unless that attempt delivered it."""
    schedule = settings.AUTOMATION_RETRY_SCHEDULE
    with transaction.atomic():
        # The automation's row first, then the delivery's, in the order a switch-off takes them.
        automation = Automation.objects.select_for_update(no_key=True).get(
            id=delivery.automation_id
        )
        delivery.status, delivery.finished_at = (
            Delivery.objects.select_for_update()
            .values_list("status", "finished_at")
            .get(id=delivery.id)
        )
        DeliveryAttempt.objects.create(
            delivery=delivery,
            attempted_at=now,
            status_code=outcome.status_code,
            latency_ms=outcome.latency_ms,
            response_excerpt=outcome.excerpt[:1024],
            error=outcome.error[:2000],
        )
        delivery.attempts += 1
        delivery.lease_until = None
        delay: float | None = None
        if outcome.delivered:
            delivery.status = Delivery.Status.DELIVERED
            delivery.finished_at = now
        elif delivery.status == Delivery.Status.CANCELLED:
            pass  # switched off while in flight: its finished_at is the switch-off's
        elif outcome.retryable and delivery.attempts < len(schedule):
            delay = float(schedule[delivery.attempts])
            delivery.status = Delivery.Status.RETRYING
            delivery.next_attempt_at = now + timedelta(seconds=delay)
        else:
            delivery.status = Delivery.Status.FAILED
            delivery.finished_at = now
        delivery.save(
            update_fields=["attempts", "lease_until", "status", "finished_at", "next_attempt_at"]
        )
        if not outcome.delivered and automation.enabled:
            automation_disable_if_failing(automation=automation, now=now)
    if not outcome.delivered:
        logger.warning(
            "delivery %s of automation %s: %s", delivery.id, delivery.automation_id, outcome.error
        )
    return delay


def automation_disable_if_failing(*, automation: Automation, now: datetime) -> bool:
    """Switch off an automation whose endpoint has failed every attempt for the configured time
    (5 days by default), saying why, its pending deliveries cancelled (automation_switch_off);
    True when it did."""
    attempts = DeliveryAttempt.objects.filter(delivery__automation=automation)
    last_success = (
        attempts.filter(status_code__gte=200, status_code__lt=300)
        .order_by("-attempted_at")
        .values_list("attempted_at", flat=True)
        .first()
    )
    failing = attempts if last_success is None else attempts.filter(attempted_at__gt=last_success)
    since = failing.aggregate(first=Min("attempted_at"))["first"]
    limit = timedelta(seconds=settings.AUTOMATION_DISABLE_AFTER_SECONDS)
    if since is None or now - since < limit:
        return False
    last_error = failing.order_by("-attempted_at").values_list("error", flat=True).first()
    automation_switch_off(
        automation=automation,
        reason=f"Disabled {now:%Y-%m-%d %H:%M} UTC: every delivery attempt since "
        f"{since:%Y-%m-%d %H:%M} UTC failed (last: {last_error or 'no answer'}).",
        now=now,
    )
    return True


def delivery_replay(*, delivery: Delivery, now: datetime | None = None) -> None:
    """Send a delivery again (same webhook-id), with a fresh retry schedule."""
    now = now or timezone.now()
    Delivery.objects.filter(id=delivery.id).update(
        status=Delivery.Status.PENDING,
        attempts=0,
        next_attempt_at=now,
        lease_until=None,
        finished_at=None,
    )
    _enqueue([delivery.id])


def deliveries_replay_failed_since(*, automation: Automation, since: datetime) -> int:
    """Replay every failed delivery of the automation made since `since`; returns how many."""
    now = timezone.now()
    ids = list(
        automation.deliveries.filter(status=Delivery.Status.FAILED, created_at__gte=since)
        .order_by("created_at")
        .values_list("id", flat=True)
    )
    Delivery.objects.filter(id__in=ids).update(
        status=Delivery.Status.PENDING, attempts=0, next_attempt_at=now, finished_at=None
    )
    _enqueue(ids)
    return len(ids)


def deliveries_due(*, now: datetime | None = None, limit: int = 1000) -> list[str]:
    """Deliveries due whose attempt is not in flight (a lost task, an expired lease), of
    automations that are on."""
    now = now or timezone.now()
    due = (
        Delivery.objects.filter(
            status__in=_PENDING, next_attempt_at__lte=now, automation__enabled=True
        )
        .exclude(lease_until__gt=now)
        .order_by("next_attempt_at")
        .values_list("id", flat=True)[:limit]
    )
    return list(due)


def _enqueue(ids: list[str]) -> None:
    from automations.tasks import delivery_attempt as task

    transaction.on_commit(lambda: [task.delay(delivery_id) for delivery_id in ids])
