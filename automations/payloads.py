"""What a delivery says: the event type, and the subject as the read API shows it.

Body: {"type": "account.score_changed", "timestamp": ISO 8601, "data": {"workspace": {...},
"account" (or "user"): {...}, "trigger": {...}, "automation": {"id", "name"}}}.

A digest ("account.digest", "user.digest") stands for the subjects of one refresh past
AUTOMATION_MAX_PER_REFRESH: its data has "count" (how many more) and "subjects_url" (their list)
instead of a subject.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse

from automations.models import Automation
from engagement import bands
from engagement.models import AccountScore, SegmentMember, User, UserScore
from engagement.presentation import account_name, user_name

# The event type's second half, by trigger (new subjects are "created").
_EVENT: dict[str, str] = {
    Automation.Trigger.SCORE_CHANGED: "score_changed",
    Automation.Trigger.BAND_ENTERED: "band_entered",
    Automation.Trigger.SEGMENT_ENTERED: "segment_entered",
    Automation.Trigger.SEGMENT_LEFT: "segment_left",
    Automation.Trigger.NEW_ACCOUNT: "created",
    Automation.Trigger.NEW_USER: "created",
    Automation.Trigger.INACTIVE: "inactive",
}
TEST_EVENT = "automation.test"
DIGEST = "digest"  # the second half of a digest's event type, whatever the trigger


def event_type(automation: Automation) -> str:
    return f"{automation.subject_kind}.{_EVENT[automation.trigger]}"


def digest_event_type(automation: Automation) -> str:
    return f"{automation.subject_kind}.{DIGEST}"


def is_digest(event: str) -> bool:
    return event.rpartition(".")[2] == DIGEST


def _absolute(path: str) -> str:
    return f"{settings.PUBLIC_URL}{path}"


def subject_links(*, kind: str, workspace_id: int, subject_id: int) -> dict[str, str]:
    read_route = "read-user" if kind == "user" else "read-account"
    page = "dashboard:user" if kind == "user" else "dashboard:account"
    key = "user_id" if kind == "user" else "account_id"
    read = reverse(read_route, kwargs={key: subject_id})
    return {
        "self": _absolute(f"{read}?workspace_id={workspace_id}"),
        "dashboard": _absolute(
            reverse(page, kwargs={"workspace_id": workspace_id, key: subject_id})
        ),
    }


def subjects_shown(*, kind: str, workspace_id: int, subject_ids: list[int]) -> dict[int, dict]:
    """The subjects as the read API shows them, by id (a bulk read: three queries)."""
    rows: QuerySet[UserScore] | QuerySet[AccountScore]
    if kind == "user":
        rows = UserScore.objects.filter(workspace_id=workspace_id, user_id__in=subject_ids)
        rows = rows.select_related("user")
    else:
        rows = AccountScore.objects.filter(workspace_id=workspace_id, account_id__in=subject_ids)
        rows = rows.select_related("account")
    column = f"{kind}_id"
    segments: dict[int, list[str]] = {}
    members = SegmentMember.objects.filter(
        segment__workspace_id=workspace_id, **{f"{column}__in": subject_ids}
    ).values_list(column, "segment__name")
    for subject_id, name in members.order_by("segment__name"):
        segments.setdefault(subject_id, []).append(name)
    shown = {}
    for row in rows:
        person = row.user if isinstance(row, UserScore) else row.account
        if isinstance(person, User):
            name = user_name(person.traits, person.email)
        else:
            name = account_name(person.traits)
        shown[person.id] = {
            "id": person.id,
            "tracking_id": person.tracking_id,
            "name": name,
            "engagement_score": row.engagement_score,
            "previous_score": row.previous_score,
            "score_change": row.score_change,
            "last_seen": row.last_seen.isoformat() if row.last_seen else None,
            "segments": segments.get(person.id, []),
            "_links": subject_links(kind=kind, workspace_id=workspace_id, subject_id=person.id),
        }
    return shown


def trigger_shown(automation: Automation) -> dict:
    trigger: dict = {"type": automation.trigger}
    if automation.threshold is not None:
        trigger["threshold"] = automation.threshold
    if automation.segment is not None:
        trigger["segment"] = {"id": automation.segment.id, "name": automation.segment.name}
    if automation.days is not None:
        trigger["days"] = automation.days
    return trigger


def body(*, automation: Automation, event: str, subject: dict | None, timestamp: datetime) -> dict:
    workspace = automation.workspace
    data: dict = {"workspace": {"id": workspace.id, "name": workspace.name}}
    if subject is not None:
        data[automation.subject_kind] = subject
    data["trigger"] = trigger_shown(automation)
    data["automation"] = {"id": automation.id, "name": automation.name}
    return {"type": event, "timestamp": timestamp.isoformat(), "data": data}


def subjects_url(automation: Automation) -> str:
    """The dashboard's list of the subjects a digest counts, as near as a list can say it: the
    accounts list filtered by the segment or the band of the trigger, a user segment's page
    (its members), else the automation's page."""
    workspace_id = automation.workspace_id
    trigger = automation.trigger
    on_accounts = automation.target == Automation.Target.ACCOUNTS
    accounts = reverse("dashboard:accounts", kwargs={"workspace_id": workspace_id})
    if trigger == Automation.Trigger.SEGMENT_ENTERED and automation.segment_id is not None:
        if on_accounts:
            return _absolute(f"{accounts}?{urlencode({'segment': automation.segment_id})}")
        segment = reverse(
            "dashboard:segment",
            kwargs={"workspace_id": workspace_id, "segment_id": automation.segment_id},
        )
        return _absolute(segment)
    band_floor = automation.threshold if trigger == Automation.Trigger.BAND_ENTERED else None
    if on_accounts and band_floor is not None:
        band = bands.band_of(band_floor).key
        return _absolute(f"{accounts}?{urlencode({'band': band})}")
    page = reverse(
        "automations:detail",
        kwargs={"workspace_id": workspace_id, "automation_id": automation.id},
    )
    return _absolute(page)


def digest_body(*, automation: Automation, count: int, timestamp: datetime) -> dict:
    """The digest of `count` subjects past the refresh's single messages."""
    workspace = automation.workspace
    return {
        "type": digest_event_type(automation),
        "timestamp": timestamp.isoformat(),
        "data": {
            "workspace": {"id": workspace.id, "name": workspace.name},
            "trigger": trigger_shown(automation),
            "automation": {"id": automation.id, "name": automation.name},
            "count": count,
            "subjects_url": subjects_url(automation),
        },
    }


def what_happened(automation: Automation, subject: dict) -> str:
    """One line for people (Slack): what the subject did."""
    trigger = automation.trigger
    if trigger == Automation.Trigger.SCORE_CHANGED:
        return f"score changed by {subject['score_change']:+d} points"
    if trigger == Automation.Trigger.BAND_ENTERED:
        return f"entered the {band_label(subject['engagement_score'])} band"
    if trigger in (Automation.Trigger.SEGMENT_ENTERED, Automation.Trigger.SEGMENT_LEFT):
        verb = "entered" if trigger == Automation.Trigger.SEGMENT_ENTERED else "left"
        segment = automation.segment
        assert segment is not None  # a segment trigger always has its segment
        return f"{verb} the segment {segment.name}"
    if trigger == Automation.Trigger.INACTIVE:
        return f"no event for {automation.days} days"
    return f"new {automation.subject_kind}"


BANDS = bands.BAND_FLOORS  # the bands' floors, highest first (engagement/bands.py)


def band_of(score: int) -> int:
    """The floor of the score's band: what band_entered stores and compares."""
    return bands.band_of(score).floor


def band_label(score: int) -> str:
    return bands.band_of(score).label
