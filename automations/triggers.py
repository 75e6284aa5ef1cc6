"""Which subjects entered an automation's condition in a score refresh.

Called from the refresh's announcement (engagement.refresh_hooks), inside its transaction, for the
subjects it recomputed (every subject after a full rescore): never a scan of a workspace on an
incremental refresh. A condition that holds is kept as an AutomationSubjectState row, so entering
is a row that was not there (or another band): staying in it fires nothing, and subjects already
in it when the automation was made were recorded then (automation_seed).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q, QuerySet

from automations.models import Automation, AutomationFiring, AutomationSubjectState
from automations.payloads import BANDS, band_of
from engagement.models import Account, AccountScore, SegmentMembershipChange, User, UserScore
from engagement.refresh_hooks import ScoresRefreshed
from engagement.segment_matching import score_rows_matching

_STATEFUL = {
    Automation.Trigger.SCORE_CHANGED,
    Automation.Trigger.BAND_ENTERED,
    Automation.Trigger.INACTIVE,
}


@dataclass(frozen=True, slots=True)
class Entered:
    automation: Automation
    subject_ids: list[int]


def _score_rows(automation: Automation, subject_ids: Iterable[int] | None) -> QuerySet:
    model = UserScore if automation.target == Automation.Target.USERS else AccountScore
    rows = model.objects.filter(workspace_id=automation.workspace_id)
    if subject_ids is not None:
        rows = rows.filter(**{f"{automation.subject_kind}_id__in": list(subject_ids)})
    return rows


def _condition(automation: Automation, now: datetime) -> Q:
    trigger = automation.trigger
    if trigger == Automation.Trigger.SCORE_CHANGED:
        points = automation.threshold or 10
        return Q(score_change__gte=points) | Q(score_change__lte=-points)
    if trigger == Automation.Trigger.BAND_ENTERED and automation.threshold is not None:
        floor = automation.threshold
        higher = [band for band in BANDS if band > floor]
        below = Q(engagement_score__lt=min(higher)) if higher else Q()
        return Q(engagement_score__gte=floor) & below
    if trigger == Automation.Trigger.INACTIVE:
        return Q(last_seen__lt=now - timedelta(days=automation.days or 30))
    return Q()


def in_condition(
    automation: Automation, subject_ids: Iterable[int] | None, now: datetime
) -> dict[int, int | None]:
    """The subjects (of `subject_ids`, or all) in the condition now, with their band."""
    rows = score_rows_matching(
        workspace_id=automation.workspace_id,
        target=automation.target,
        conditions=automation.conditions,
        match=automation.match,
        now=now,
        queryset=_score_rows(automation, subject_ids).filter(_condition(automation, now)),
    )
    column = f"{automation.subject_kind}_id"
    if automation.trigger == Automation.Trigger.BAND_ENTERED:
        return {sid: band_of(score) for sid, score in rows.values_list(column, "engagement_score")}
    return dict.fromkeys(rows.values_list(column, flat=True))


def states_record(
    automation: Automation, subject_ids: Iterable[int] | None, now: datetime
) -> list[int]:
    """Bring the automation's states up to date for these subjects; returns who entered."""
    current = in_condition(automation, subject_ids, now)
    states = AutomationSubjectState.objects.filter(automation=automation)
    if subject_ids is not None:
        states = states.filter(subject_id__in=list(subject_ids))
    kept = dict(states.values_list("subject_id", "band"))
    entered = [sid for sid, band in current.items() if sid not in kept or kept[sid] != band]
    gone = [sid for sid in kept if sid not in current]
    if gone:
        AutomationSubjectState.objects.filter(automation=automation, subject_id__in=gone).delete()
    if entered:
        AutomationSubjectState.objects.bulk_create(
            [
                AutomationSubjectState(automation=automation, subject_id=sid, band=current[sid])
                for sid in entered
            ],
            update_conflicts=True,
            unique_fields=["automation", "subject_id"],
            update_fields=["band"],
        )
    return sorted(entered)


def _segment_changed(automation: Automation, now: datetime) -> list[int]:
    change = (
        SegmentMembershipChange.Change.JOINED
        if automation.trigger == Automation.Trigger.SEGMENT_ENTERED
        else SegmentMembershipChange.Change.LEFT
    )
    column = f"{automation.subject_kind}_id"
    segment_id = automation.segment_id
    assert segment_id is not None  # a segment trigger always has its segment
    changed = SegmentMembershipChange.objects.filter(
        segment_id=segment_id, change=change, at=now
    ).values_list(column, flat=True)
    return _matching_conditions(automation, [sid for sid in changed if sid], now)


def _new_subjects(automation: Automation, subject_ids: Iterable[int] | None, now: datetime):
    """Subjects created since the automation was, scored for the first time here."""
    model = User if automation.trigger == Automation.Trigger.NEW_USER else Account
    new = model.objects.filter(
        product_id=automation.workspace.product_id, created_at__gte=automation.created_at
    )
    if subject_ids is not None:
        new = new.filter(id__in=list(subject_ids))
    fired = AutomationFiring.objects.filter(automation=automation).values("subject_id")
    ids = list(new.exclude(id__in=fired).values_list("id", flat=True))
    return _matching_conditions(automation, ids, now)


def _matching_conditions(automation: Automation, ids: list[int], now: datetime) -> list[int]:
    if not ids:
        return []
    if not automation.conditions:
        return sorted(ids)
    return sorted(in_condition(automation, ids, now))


def entered(automation: Automation, refreshed: ScoresRefreshed) -> list[int]:
    """The subjects that entered the automation's condition in this refresh."""
    on_users = automation.target == Automation.Target.USERS
    ids = refreshed.user_ids if on_users else refreshed.account_ids
    if automation.trigger in _STATEFUL:
        return states_record(automation, ids, refreshed.now)
    if automation.trigger in (
        Automation.Trigger.SEGMENT_ENTERED,
        Automation.Trigger.SEGMENT_LEFT,
    ):
        return _segment_changed(automation, refreshed.now)
    return _new_subjects(automation, ids, refreshed.now)


def automation_seed(automation: Automation, now: datetime) -> None:
    """Record who is already in the condition, so they do not fire (a new or changed
    automation); a trigger without state has nothing to record."""
    AutomationSubjectState.objects.filter(automation=automation).delete()
    if automation.trigger in _STATEFUL:
        states_record(automation, None, now)


def cooled_down(
    entered: list[tuple[Automation, list[int]]], now: datetime
) -> list[tuple[Automation, list[int]]]:
    """Each automation with those of its subjects whose last firing is older than its
    cool-down, leaving out automations with none; one query for all of them."""
    entered = [(automation, ids) for automation, ids in entered if ids]
    if not entered:
        return []
    cooldowns = {automation.id: automation.cooldown_seconds for automation, _ in entered}
    recent = AutomationFiring.objects.filter(
        automation_id__in=list(cooldowns),
        subject_id__in=sorted({sid for _, ids in entered for sid in ids}),
        fired_at__gt=now - timedelta(seconds=max(cooldowns.values())),
    ).values_list("automation_id", "subject_id", "fired_at")
    held = {
        (automation_id, subject_id)
        for automation_id, subject_id, fired_at in recent
        if fired_at > now - timedelta(seconds=cooldowns[automation_id])
    }
    due = [
        (automation, [sid for sid in ids if (automation.id, sid) not in held])
        for automation, ids in entered
    ]
    return [(automation, ids) for automation, ids in due if ids]
