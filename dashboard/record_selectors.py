"""Reads for the dashboard's page of one account, one user or one segment: the scored lists on
them and their daily figures.

Always given a record the caller has already scoped to the signed-in user's products. Names and
last-seen times follow engagement.presentation, as the read API does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import TruncDate

from dashboard.overview_selectors import DayCount, days_ending_today
from engagement import selectors
from engagement.models import (
    Account,
    AccountScore,
    EventRollup,
    Membership,
    Segment,
    SegmentMembershipChange,
    User,
    UserScore,
    Workspace,
)
from engagement.presentation import (
    account_last_seen,
    account_name,
    natural_sort_key,
    user_last_seen,
    user_name,
)
from engagement.stored_json import read_traits


@dataclass(frozen=True, slots=True)
class SubjectScore:
    """A user (or account) with its score in the workspace, for the lists on a page."""

    id: int
    tracking_id: str
    label: str | None
    score: int
    change: int
    last_seen: datetime | None


def account_users(
    *, workspace: Workspace, account: Account, limit: int = 200
) -> list[SubjectScore]:
    """The account's users with their score in the workspace, highest first."""
    user_ids = list(
        Membership.objects.filter(account_id=account.id)
        .order_by("-linked_at")
        .values_list("user_id", flat=True)[:limit]
    )
    users = {user.id: user for user in User.objects.filter(id__in=user_ids)}
    scores = {
        row.user_id: row
        for row in UserScore.objects.filter(workspace_id=workspace.id, user_id__in=user_ids)
    }
    found = []
    for user_id in user_ids:
        user = users[user_id]
        score = scores.get(user_id)
        found.append(
            SubjectScore(
                id=user.id,
                tracking_id=user.tracking_id,
                label=user_name(read_traits(user), user.email),
                score=score.engagement_score if score else 0,
                change=score.score_change if score else 0,
                last_seen=user_last_seen(user, score),
            )
        )
    return sorted(found, key=lambda item: (-item.score, item.id))


def user_accounts(*, workspace: Workspace, user: User) -> list[SubjectScore]:
    """The accounts the user is linked to, most recently linked first, with their scores."""
    memberships = list(
        Membership.objects.filter(user_id=user.id).select_related("account").order_by("-linked_at")
    )
    ids = [m.account_id for m in memberships]
    scores = {
        row.account_id: row
        for row in AccountScore.objects.filter(workspace_id=workspace.id, account_id__in=ids)
    }
    found = []
    for membership in memberships:
        account = membership.account
        score = scores.get(account.id)
        found.append(
            SubjectScore(
                id=account.id,
                tracking_id=account.tracking_id,
                label=account_name(read_traits(account)),
                score=score.engagement_score if score else 0,
                change=score.score_change if score else 0,
                last_seen=account_last_seen(score),
            )
        )
    return found


def _per_day(rows: QuerySet, days: list[date]) -> list[DayCount]:
    counts = {row["day"]: row["events"] for row in rows}
    return [DayCount(day, counts.get(day, 0)) for day in days]


def account_activity(*, account: Account, days: int) -> list[DayCount]:
    """Events of the account per day over the last `days` days (today included)."""
    span = days_ending_today(days)
    rows = (
        EventRollup.objects.filter(account_id=account.id, day__gte=span[0])
        .values("day")
        .annotate(events=Sum("count"))
    )
    return _per_day(rows, span)


def user_activity(*, user: User, days: int) -> list[DayCount]:
    """Events of the user per day over the last `days` days (today included)."""
    span = days_ending_today(days)
    rows = (
        EventRollup.objects.filter(product_id=user.product_id, user_id=user.id, day__gte=span[0])
        .values("day")
        .annotate(events=Sum("count"))
    )
    return _per_day(rows, span)


@dataclass(frozen=True, slots=True)
class DayChanges:
    day: date
    joined: int
    left: int


def segment_changes(*, segment: Segment, days: int) -> list[DayChanges]:
    """Joins and leaves of the segment per day (UTC) over the last `days` days, oldest first."""
    span = days_ending_today(days)
    since = datetime(span[0].year, span[0].month, span[0].day, tzinfo=UTC)
    rows = (
        SegmentMembershipChange.objects.filter(segment_id=segment.id, at__gte=since)
        .annotate(day=TruncDate("at"))
        .values("day", "change")
        .annotate(count=Count("id"))
    )
    counts = {(row["day"], row["change"]): row["count"] for row in rows}
    joined, left = SegmentMembershipChange.Change.JOINED, SegmentMembershipChange.Change.LEFT
    return [
        DayChanges(day, counts.get((day, joined), 0), counts.get((day, left), 0)) for day in span
    ]


@dataclass(frozen=True, slots=True)
class MemberRow:
    """A segment member as its page lists it: by name, the tracking id beside it."""

    id: int  # the account's or user's
    tracking_id: str
    label: str | None
    joined_at: datetime


@dataclass(frozen=True, slots=True)
class MemberPage:
    items: list[MemberRow]
    total: int


def segment_member_rows(*, segment: Segment, offset: int, limit: int) -> MemberPage:
    """A page of the segment's current members (most recently joined first), each with the name
    a page shows for it (engagement.presentation): one more query for the page's names."""
    members = selectors.segment_member_list(segment=segment, offset=offset, limit=limit)
    users = segment.target == Segment.Target.USERS
    model = User if users else Account
    ids: list[int] = []
    for m in members.items:
        member_id = m.user_id if users else m.account_id
        assert member_id is not None  # a users segment's members are users, an accounts' accounts
        ids.append(member_id)
    columns = ("id", "traits", "email") if users else ("id", "traits")
    subjects = {s.id: s for s in model.objects.filter(id__in=ids).only(*columns)}
    rows = []
    for member, subject_id in zip(members.items, ids, strict=True):
        subject = member.user if users else member.account
        assert subject is not None  # as above
        found = subjects.get(subject_id)
        traits = read_traits(found) if found is not None else {}
        label = user_name(traits, found.email) if isinstance(found, User) else account_name(traits)
        rows.append(MemberRow(subject_id, subject.tracking_id, label, member.joined_at))
    return MemberPage(items=rows, total=members.total)


def segments_for_workspace(*, workspace: Workspace) -> list[Segment]:
    """The workspace's segments, the built-in ones first, then by name in natural order ("Tier 2"
    before "Tier 10"); each with `member_count`. A workspace has a few dozen: sorted here."""
    segments = Segment.objects.filter(workspace_id=workspace.id).annotate(
        member_count=Count("members")
    )
    return sorted(segments, key=lambda s: (not s.builtin, natural_sort_key(s.name), s.id))
