"""Automations: making and changing them, and turning a score refresh into deliveries."""

from __future__ import annotations

import logging
import math
import uuid
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from automations import payloads, triggers
from automations.client import UnsafeTarget, target_check
from automations.models import Automation, AutomationFiring, Delivery
from automations.signing import secret_generate
from engagement.bands import band_of
from engagement.input_rules import days_fault, is_whole, text_fault, whole_fault
from engagement.models import Segment, Workspace
from engagement.refresh_hooks import ScoresRefreshed
from engagement.segment_conditions import segment_conditions_validate
from engagement.segment_matching import CONDITIONS_UNEVALUABLE, unevaluable_described

ROTATION_OVERLAP = timedelta(hours=24)
_NEW = {Automation.Trigger.NEW_ACCOUNT, Automation.Trigger.NEW_USER}
_SEGMENT_TRIGGERS = (Automation.Trigger.SEGMENT_ENTERED, Automation.Trigger.SEGMENT_LEFT)
# The bounds of an automation's settings (docs/automations.md, "Settings and their bounds").
NAME_MAX_LENGTH = 200  # Automation.name's column
URL_MAX_LENGTH = 2000
THRESHOLD_MAX_POINTS = 100  # a score lies in 0..100, so no change is larger
COOLDOWN_MAX_DAYS = 365
COOLDOWN_MAX_SECONDS = COOLDOWN_MAX_DAYS * 24 * 3600
DEFAULT_COOLDOWN_SECONDS = 24 * 3600
_PENDING = (Delivery.Status.PENDING, Delivery.Status.RETRYING)
logger = logging.getLogger(__name__)


def cooldown_seconds_of(hours: float) -> int | float:
    """A cool-down typed in hours, in seconds; a value that is not a finite number is passed on
    as it is, for automation_faults to refuse with the rest."""
    seconds = hours * 3600
    if isinstance(seconds, float) and math.isfinite(seconds):
        return round(seconds)
    return seconds


def _choice_fault(value: object, choices: list[str]) -> str | None:
    return None if value in choices else f"one of {', '.join(choices)}"


def _threshold_fault(trigger: str, threshold: object) -> str | None:
    if trigger == Automation.Trigger.SCORE_CHANGED:
        if whole_fault(threshold, least=1, most=THRESHOLD_MAX_POINTS) is None:
            return None
        return (
            "score_changed needs a threshold, points of change up or down: "
            f"a whole number from 1 to {THRESHOLD_MAX_POINTS}"
        )
    if trigger == Automation.Trigger.BAND_ENTERED:
        if threshold is None or (is_whole(threshold) and threshold in payloads.BANDS):
            return None
        return "band_entered takes a band's floor: 75, 50, 25 or 0 (none: any)"
    if threshold is None:
        return None
    return whole_fault(threshold, least=0, most=THRESHOLD_MAX_POINTS)


def _days_fault(trigger: str, days: object) -> str | None:
    if trigger == Automation.Trigger.INACTIVE:
        fault = days_fault(days, least=1)
        return None if fault is None else f"inactive needs days without an event: {fault}"
    return None if days is None else days_fault(days, least=1)


def _segment_fault(automation: Automation) -> str | None:
    if automation.trigger not in _SEGMENT_TRIGGERS:
        return None
    segment = automation.segment
    if segment is None:
        return f"{automation.trigger} needs a segment of the workspace"
    if segment.workspace_id != automation.workspace_id:
        return "the segment belongs to another workspace"
    if segment.target != automation.target:
        return f"the segment holds {segment.target}, not the target"
    return None


def _conditions_faults(target: str, conditions: object) -> list[str]:
    """The segment condition language's own rules (at most MAX_CONDITIONS, each usable)."""
    try:
        segment_conditions_validate(target=target, conditions=conditions)
    except ValidationError as exc:
        return exc.messages
    return []


def _url_fault(url: object) -> str | None:
    fault = text_fault(url, max_length=URL_MAX_LENGTH, what="a URL")
    if fault:
        return fault
    try:
        target_check(url)  # type: ignore[arg-type]
    except UnsafeTarget as exc:
        return exc.message
    return None


def _cooldown_fault(seconds: object) -> str | None:
    if whole_fault(seconds, most=COOLDOWN_MAX_SECONDS) is None:
        return None
    return f"a cool-down from 0 to {COOLDOWN_MAX_DAYS} days ({COOLDOWN_MAX_SECONDS:,} seconds)"


def automation_faults(automation: Automation) -> dict[str, list[str]]:
    """Every fault of an automation's settings, by field; empty when it may be saved. The one
    check of every surface (dashboard, admin, commands): automation_create and
    automation_update call it, and a form calls it on what it parsed to list every fault at
    once."""
    trigger = automation.trigger
    faults: dict[str, str | list[str] | None] = {
        "name": text_fault(automation.name, max_length=NAME_MAX_LENGTH, what="a name"),
        "trigger": _choice_fault(trigger, Automation.Trigger.values),
        "target": _choice_fault(automation.target, Automation.Target.values),
        "threshold": _threshold_fault(trigger, automation.threshold),
        "days": _days_fault(trigger, automation.days),
        "segment": _segment_fault(automation),
        "match": _choice_fault(automation.match, Automation.Match.values),
        "destination": _choice_fault(automation.destination, Automation.Destination.values),
        "conditions": _conditions_faults(automation.target, automation.conditions),
        "url": _url_fault(automation.url),
        "cooldown_seconds": _cooldown_fault(automation.cooldown_seconds),
    }
    if trigger == Automation.Trigger.NEW_ACCOUNT and automation.target != "accounts":
        faults["target"] = "new_account targets accounts"
    if trigger == Automation.Trigger.NEW_USER and automation.target != "users":
        faults["target"] = "new_user targets users"
    return {
        field: [fault] if isinstance(fault, str) else fault
        for field, fault in faults.items()
        if fault
    }


def automation_validate(automation: Automation) -> None:
    """Every fault of the automation's settings at once, as a ValidationError by field."""
    faults = automation_faults(automation)
    if faults:
        raise ValidationError(faults)


def _destination_shown(destination: str, url: object) -> str:
    """Where it sends, in a word: the receiver's host, or Slack (every Slack URL has one host)."""
    if destination == Automation.Destination.SLACK:
        return "Slack"
    try:
        host = urlsplit(url).hostname if isinstance(url, str) else None
    except ValueError:  # a URL no parser reads; automation_faults says so
        host = None
    return host or "a webhook"


def _trigger_shown(
    trigger: str, target: str, threshold: object, segment: Segment | None, days: object
) -> str:
    """The trigger with what distinguishes it from another of its kind."""
    of = "an account" if target == Automation.Target.ACCOUNTS else "a user"
    if trigger == Automation.Trigger.SCORE_CHANGED:
        return f"Score of {of} changed by {threshold} or more"
    if trigger == Automation.Trigger.BAND_ENTERED:
        if is_whole(threshold):
            return f"{of.capitalize()} entered the {band_of(threshold).label} band"
        return f"{of.capitalize()} entered a score band"
    if trigger in _SEGMENT_TRIGGERS:
        verb = "entered" if trigger == Automation.Trigger.SEGMENT_ENTERED else "left"
        return f"{of.capitalize()} {verb} {segment.name if segment else 'a segment'}"
    if trigger == Automation.Trigger.INACTIVE:
        return f"No event from {of} for {days} days"
    if trigger in Automation.Trigger.values:
        return Automation.Trigger(trigger).label
    return "Automation"


def default_name(
    *,
    workspace: Workspace | None,
    trigger: str,
    target: str,
    destination: str,
    url: object,
    threshold: object = None,
    segment: Segment | None = None,
    days: object = None,
) -> str:
    """The name of an automation made without one, telling it apart from the workspace's others:
    its trigger with what distinguishes it (threshold, band, segment, days) and where it sends,
    e.g. "New account → hooks.example.com"; a name the workspace already has gets " (2)",
    " (3)", ..."""
    shown = _trigger_shown(trigger, target, threshold, segment, days)
    base = f"{shown} → {_destination_shown(destination, url)}"[: NAME_MAX_LENGTH - 6]
    if workspace is None or workspace.pk is None:
        return base
    taken = set(
        Automation.objects.filter(workspace=workspace, name__startswith=base).values_list(
            "name", flat=True
        )
    )
    number = 1
    name = base
    while name in taken:
        number += 1
        name = f"{base} ({number})"
    return name


def automation_new(
    *,
    workspace: Workspace | None,  # None: the admin's form, its workspace not read
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
    cooldown_seconds: int = DEFAULT_COOLDOWN_SECONDS,
) -> Automation:
    """An unsaved automation with these settings and their defaults: what automation_create
    checks and saves, and what a form checks before calling it."""
    if trigger == Automation.Trigger.NEW_USER:
        target = Automation.Target.USERS
    return Automation(
        workspace=workspace,
        name=name
        or default_name(
            workspace=workspace,
            trigger=trigger,
            target=target,
            destination=destination,
            url=url,
            threshold=threshold,
            segment=segment,
            days=days,
        ),
        trigger=trigger,
        target=target,
        destination=destination,
        threshold=threshold,
        segment=segment,
        days=days,
        conditions=[] if conditions is None else conditions,
        match=match,
        url=url,
        cooldown_seconds=cooldown_seconds,
    )


def automation_changed(automation: Automation, **changes: object) -> Automation:
    """An unsaved copy of the automation with these changes, the automation itself untouched:
    what automation_update checks, and what an edit form checks before calling it."""
    fields = Automation._meta.concrete_fields
    copy = Automation(**{field.attname: getattr(automation, field.attname) for field in fields})
    for field, value in changes.items():
        setattr(copy, field, value)
    return copy


@transaction.atomic
def automation_create(**settings: object) -> Automation:
    """A new automation (automation_new's settings), checked; a webhook's secret is generated
    (shown once by the caller). Subjects already in its condition are recorded, so they do not
    fire."""
    automation = automation_new(**settings)  # type: ignore[arg-type]
    automation_validate(automation)
    if automation.destination == Automation.Destination.WEBHOOK:
        automation.secret = secret_generate()
    automation.save()
    triggers.automation_seed(automation, timezone.now())
    return automation


def _locked(automation: Automation) -> Automation:
    """The automation's row, locked for the caller's transaction: the lock a delivery's lease
    takes too (automations.delivery._lease), so a switch-off and a lease never overlap. FOR NO
    KEY UPDATE, so the refresh's inserts of deliveries and states (which share-lock the key)
    never wait on it. Its conditions are not read: a switch-off works whatever they hold."""
    return (
        Automation.objects.select_for_update(no_key=True)
        .only("id", "enabled", "disabled_reason", "updated_at")
        .get(id=automation.id)
    )


def _deliveries_cancel(automation_id: int, now: datetime) -> int:
    return Delivery.objects.filter(automation_id=automation_id, status__in=_PENDING).update(
        status=Delivery.Status.CANCELLED, finished_at=now
    )


@transaction.atomic
def automation_update(
    *, automation: Automation, switched_off_because: str = "", **changes: object
) -> Automation:
    """Change an automation's settings, checked first (nothing is written when one is at fault);
    a changed condition is recorded afresh (no storm). Switching it off here is
    automation_switch_off, with `switched_off_because` as the reason. Switching it back on
    clears the reason and sends nothing it cancelled."""
    was_enabled = _locked(automation).enabled
    automation_validate(automation_changed(automation, **changes))
    for field, value in changes.items():
        setattr(automation, field, value)
    now = timezone.now()
    if was_enabled and not automation.enabled:
        automation_switch_off(automation=automation, reason=switched_off_because, now=now)
    elif not was_enabled:
        # Deliveries a refresh made while it was off (it read the automation just before the
        # switch-off committed) are never sent, whether it stays off or is switched on.
        _deliveries_cancel(automation.id, now)
    if automation.enabled:
        automation.disabled_reason = ""
    automation.save()
    triggers.automation_seed(automation, now)
    return automation


def automation_switch_off(
    *, automation: Automation, reason: str, now: datetime | None = None
) -> int:
    """Switch the automation off, saying why, and cancel its pending and retrying deliveries
    (status cancelled, finished now), in one transaction; returns how many it cancelled. One
    already off keeps the reason it has. No attempt starts once this commits: a lease takes the
    same row lock and looks at `enabled` under it (automations.delivery._lease). An attempt
    already in flight is recorded, and its delivery stays cancelled unless that attempt
    delivered it."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _locked(automation)
        if locked.enabled:
            locked.enabled = False
            locked.disabled_reason = reason
            locked.save(update_fields=["enabled", "disabled_reason", "updated_at"])
        automation.enabled = False
        automation.disabled_reason = locked.disabled_reason
        return _deliveries_cancel(automation.id, now)


def switched_off_reason(*, where: str, who: str = "", now: datetime | None = None) -> str:
    """The reason shown for a switch-off by a person: when, where and by whom."""
    now = now or timezone.now()
    by = f" by {who}" if who else ""
    return f"Switched off {now:%Y-%m-%d %H:%M} UTC {where}{by}."


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


# A delivery to make: its automation, event type, subject (None for a test or a digest) and body.
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


def _most_engaged_first(subject: dict) -> tuple[int, int]:
    return (-(subject["engagement_score"] or 0), subject["id"])


def _fire(entered: list[tuple[Automation, list[int]]], now: datetime) -> int:
    """Deliveries to the subjects that entered each automation's condition, past its
    cool-down; returns how many. The automations of a refresh are served together (a
    workspace's): their recent firings read in one query, each kind of subject shown once for
    all of them, their deliveries and firings written in one statement each; the hook's fixed
    cost was a query or two per automation for each of these (docs/benchmarks.md,
    2026-11-27).

    No storms: an automation sends at most AUTOMATION_MAX_PER_REFRESH single messages a refresh
    (the highest scores first, then the lowest id), and one digest counting the rest. Those
    past the limit are recorded as fired all the same, so the next refresh does not send them."""
    due = triggers.cooled_down(entered, now)
    if not due:
        return 0
    workspace_id = due[0][0].workspace_id
    shown: dict[str, dict[int, dict]] = {}
    for kind in sorted({automation.subject_kind for automation, _ in due}):
        of_kind_ids = {sid for a, ids in due if a.subject_kind == kind for sid in ids}
        shown[kind] = payloads.subjects_shown(
            kind=kind, workspace_id=workspace_id, subject_ids=sorted(of_kind_ids)
        )
    most = settings.AUTOMATION_MAX_PER_REFRESH
    made: list[DeliveryToMake] = []
    fired: list[tuple[Automation, int]] = []
    for automation, subject_ids in due:
        event = payloads.event_type(automation)
        of_kind = shown[automation.subject_kind]
        subjects = sorted(
            (of_kind[sid] for sid in subject_ids if sid in of_kind), key=_most_engaged_first
        )
        made.extend(
            (
                automation,
                event,
                subject["id"],
                payloads.body(automation=automation, event=event, subject=subject, timestamp=now),
            )
            for subject in subjects[:most]
        )
        if len(subjects) > most:
            digest = payloads.digest_body(
                automation=automation, count=len(subjects) - most, timestamp=now
            )
            made.append((automation, digest["type"], None, digest))
        fired.extend((automation, subject["id"]) for subject in subjects)
    if not made:
        return 0
    deliveries_create(made=made, now=now)
    firings_record(fired, now)
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
    # Conditions are loaded one automation at a time, inside its own try: one stored past the
    # checks (nested too deep to decode, a value no query can hold) switches that automation
    # off with the reason, and the refresh and every other automation carry on.
    automations = (
        Automation.objects.filter(workspace_id=refreshed.workspace_id, enabled=True)
        .select_related("workspace", "segment")
        .defer("conditions")
    )
    entered: list[tuple[Automation, list[int]]] = []
    known: list[tuple[Automation, int]] = []
    for automation in automations.order_by("id"):
        try:
            with transaction.atomic():  # a savepoint: a refused statement spoils nothing else
                subject_ids = triggers.entered(automation, refreshed)
        except (ValidationError, *CONDITIONS_UNEVALUABLE) as error:
            why = (
                "; ".join(error.messages)
                if isinstance(error, ValidationError)
                else unevaluable_described(error)
            )
            reason = f"Its conditions cannot be evaluated: {why}"
            logger.warning("automation %s switched off: %s", automation.id, reason)
            automation_switch_off(automation=automation, reason=reason[:2000], now=refreshed.now)
            continue
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
