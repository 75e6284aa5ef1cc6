"""Automations: making and changing them, and turning a score refresh into deliveries."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from automations import payloads, triggers
from automations.client import UnsafeTarget, target_check
from automations.models import Automation, AutomationFiring, Delivery
from automations.signing import secret_generate
from engagement.models import Segment, Workspace
from engagement.refresh_hooks import ScoresRefreshed
from engagement.segment_conditions import segment_conditions_validate

ROTATION_OVERLAP = timedelta(hours=24)
_NEW = {Automation.Trigger.NEW_ACCOUNT, Automation.Trigger.NEW_USER}


def automation_validate(automation: Automation) -> None:
    """Every fault of the automation's settings at once, as a ValidationError."""
    errors: dict[str, str] = {}
    trigger = automation.trigger
    if trigger not in Automation.Trigger.values:
        errors["trigger"] = f"one of {', '.join(Automation.Trigger.values)}"
    if trigger == Automation.Trigger.SCORE_CHANGED and not automation.threshold:
        errors["threshold"] = "score_changed needs a threshold: points of change, up or down"
    if trigger == Automation.Trigger.BAND_ENTERED and automation.threshold not in (
        None,
        *payloads.BANDS,
    ):
        errors["threshold"] = "band_entered takes a band's floor: 75, 50, 25 or 0 (none: any)"
    if trigger == Automation.Trigger.INACTIVE and not automation.days:
        errors["days"] = "inactive needs days: how many days without an event"
    if trigger in (Automation.Trigger.SEGMENT_ENTERED, Automation.Trigger.SEGMENT_LEFT):
        if automation.segment_id is None:
            errors["segment"] = f"{trigger} needs a segment of the workspace"
        elif automation.segment.workspace_id != automation.workspace_id:
            errors["segment"] = "the segment belongs to another workspace"
        elif automation.segment.target != automation.target:
            errors["segment"] = f"the segment holds {automation.segment.target}, not the target"
    if trigger == Automation.Trigger.NEW_ACCOUNT and automation.target != "accounts":
        errors["target"] = "new_account targets accounts"
    if trigger == Automation.Trigger.NEW_USER and automation.target != "users":
        errors["target"] = "new_user targets users"
    if automation.match not in Automation.Match.values:
        errors["match"] = "all or any"
    if automation.destination not in Automation.Destination.values:
        errors["destination"] = "webhook or slack"
    try:
        segment_conditions_validate(target=automation.target, conditions=automation.conditions)
    except ValidationError as exc:
        errors["conditions"] = "; ".join(exc.messages)
    try:
        target_check(automation.url)
    except UnsafeTarget as exc:
        errors["url"] = exc.message
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def automation_create(
    *,
    workspace: Workspace,
    trigger: str,
    url: str,
    name: str = "",
    target: str = Automation.Target.ACCOUNTS,
    destination: str = Automation.Destination.WEBHOOK,
    threshold: int | None = None,
    segment: Segment | None = None,
    days: int | None = None,
    conditions: list | None = None,
    match: str = Automation.Match.ALL,
    cooldown_seconds: int = 24 * 3600,
) -> Automation:
    """A new automation; a webhook's secret is generated (shown once by the caller). Subjects
    already in its condition are recorded, so they do not fire."""
    if trigger == Automation.Trigger.NEW_USER:
        target = Automation.Target.USERS
    automation = Automation(
        workspace=workspace,
        name=name or f"{trigger} ({target})",
        trigger=trigger,
        target=target,
        destination=destination,
        threshold=threshold,
        segment=segment,
        days=days,
        conditions=conditions or [],
        match=match,
        url=url,
        cooldown_seconds=cooldown_seconds,
    )
    automation_validate(automation)
    if destination == Automation.Destination.WEBHOOK:
        automation.secret = secret_generate()
    automation.save()
    triggers.automation_seed(automation, timezone.now())
    return automation


@transaction.atomic
def automation_update(*, automation: Automation, **changes: object) -> Automation:
    """Change an automation's settings; a changed condition is recorded afresh (no storm)."""
    for field, value in changes.items():
        setattr(automation, field, value)
    automation_validate(automation)
    if automation.enabled:
        automation.disabled_reason = ""
    automation.save()
    triggers.automation_seed(automation, timezone.now())
    return automation


def automation_secret_rotate(*, automation: Automation, now: datetime | None = None) -> str:
    """A new secret; the old one keeps signing beside it for ROTATION_OVERLAP."""
    now = now or timezone.now()
    automation.previous_secret = automation.secret
    automation.previous_secret_until = now + ROTATION_OVERLAP
    automation.secret = secret_generate()
    automation.save(update_fields=["secret", "previous_secret", "previous_secret_until"])
    return automation.secret


def delivery_id_new() -> str:
    return f"msg_{uuid.uuid4().hex}"


# A delivery to make: its automation, event type, subject (None for a test) and body.
DeliveryToMake = tuple[Automation, str, int | None, dict]


def deliveries_create(*, made: list[DeliveryToMake], now: datetime) -> list[Delivery]:
    """Deliveries in the caller's transaction, in one statement; each is sent once it commits."""
    from automations.tasks import delivery_attempt  # tasks import this module

    deliveries = Delivery.objects.bulk_create(
        [
            Delivery(
                id=delivery_id_new(),
                automation=automation,
                event_type=event,
                payload=body,
                subject_id=subject_id,
                next_attempt_at=now,
                created_at=now,
            )
            for automation, event, subject_id, body in made
        ]
    )
    ids = [delivery.id for delivery in deliveries]
    transaction.on_commit(lambda: [delivery_attempt.delay(delivery_id) for delivery_id in ids])
    return deliveries


def _fire(entered: list[tuple[Automation, list[int]]], now: datetime) -> int:
    """Deliveries to the subjects that entered each automation's condition, past its
    cool-down; returns how many. The automations of a refresh are served together (a
    workspace's): their recent firings read in one query, each kind of subject shown once for
    all of them, their deliveries and firings written in one statement each; the hook's fixed
    cost was a query or two per automation for each of these (docs/benchmarks.md,
    2026-11-27)."""
    due = triggers.cooled_down(entered, now)
    if not due:
        return 0
    workspace_id = due[0][0].workspace_id
    shown: dict[str, dict[int, dict]] = {}
    for kind in sorted({automation.subject_kind for automation, _ in due}):
        subject_ids = {sid for a, ids in due if a.subject_kind == kind for sid in ids}
        shown[kind] = payloads.subjects_shown(
            kind=kind, workspace_id=workspace_id, subject_ids=sorted(subject_ids)
        )
    made: list[DeliveryToMake] = []
    for automation, subject_ids in due:
        event = payloads.event_type(automation)
        of_kind = shown[automation.subject_kind]
        made.extend(
            (
                automation,
                event,
                sid,
                payloads.body(
                    automation=automation, event=event, subject=of_kind[sid], timestamp=now
                ),
            )
            for sid in subject_ids
            if sid in of_kind
        )
    if not made:
        return 0
    deliveries_create(made=made, now=now)
    firings_record([(automation, sid) for automation, _, sid, _ in made], now)
    return len(made)


def firings_record(fired: list[tuple[Automation, int]], now: datetime) -> None:
    """Record that these automations fired for these subjects now (one statement)."""
    AutomationFiring.objects.bulk_create(
        [
            AutomationFiring(automation=automation, subject_id=sid, fired_at=now)
            for automation, sid in fired
        ],
        update_conflicts=True,
        unique_fields=["automation", "subject_id"],
        update_fields=["fired_at"],
    )


def refresh_evaluate(refreshed: ScoresRefreshed) -> int:
    """The refresh hook: every enabled automation of the workspace, over what the refresh
    recomputed; returns the deliveries made. A baseline refresh (the first scoring, a settings
    change) records who is in each condition and fires nothing."""
    automations = Automation.objects.filter(
        workspace_id=refreshed.workspace_id, enabled=True
    ).select_related("workspace", "segment")
    entered: list[tuple[Automation, list[int]]] = []
    known: list[tuple[Automation, int]] = []
    for automation in automations.order_by("id"):
        subject_ids = triggers.entered(automation, refreshed)
        if not refreshed.baseline:
            entered.append((automation, subject_ids))
        elif automation.trigger in _NEW:
            known.extend((automation, sid) for sid in subject_ids)  # known from now on
    if known:
        firings_record(known, refreshed.now)
    return _fire(entered, refreshed.now)


def automation_test_send(*, automation: Automation, now: datetime | None = None) -> Delivery:
    """An `automation.test` event to the destination, through the same delivery path."""
    now = now or timezone.now()
    event = payloads.TEST_EVENT
    body = payloads.body(automation=automation, event=event, subject=None, timestamp=now)
    with transaction.atomic():
        return deliveries_create(made=[(automation, event, None, body)], now=now)[0]
