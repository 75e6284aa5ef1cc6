"""Identity merge: `alias(previousId → userId)` moves one user's events, rollups, links, score
history and traits onto another, in the caller's transaction, and remembers the previous id so
later messages naming it land on the merged user.

Safe to repeat and in any order with the calls around it: a merged previous id no longer has a
user of its own (its messages are resolved first), so an alias seen again finds nothing to move;
an alias that comes before any message of its previous id only records the id. The first alias
of a previous id stands: a later one naming another user is ignored (docs/browser.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta

from django.db import connection
from django.db.models import Max, Min
from django.utils import timezone

from engagement.bulk import execute
from engagement.dependents import dependents_delete
from engagement.event_store import backfill_before, rollups_merge
from engagement.models import (
    Event,
    EventActivity,
    EventRollup,
    Membership,
    ScoreHistoryBackfill,
    User,
    UserAlias,
    UserScoreDay,
    Workspace,
)
from engagement.people_rows import (
    chunks,
    merge_traits,
    users_lock_or_create,
    users_write,
)


@dataclass(slots=True)
class AliasOutcome:
    users_touched: set[int] = field(default_factory=set)
    accounts_touched: set[int] = field(default_factory=set)


def aliases_resolve(product_id: int, tracking_ids: Iterable[str]) -> dict[str, str]:
    """For each of these tracking ids that an alias merged into a user, that user's tracking
    id. One indexed probe when the product has no alias at all (the common case)."""
    ids = sorted(set(tracking_ids))
    if not ids or not UserAlias.objects.filter(product_id=product_id).exists():
        return {}
    resolved: dict[str, str] = {}
    for chunk in chunks(ids):
        resolved.update(
            UserAlias.objects.filter(product_id=product_id, previous_id__in=chunk).values_list(
                "previous_id", "user__tracking_id"
            )
        )
    return resolved


def alias_apply(
    *, product_id: int, previous_id: str, user_id: str, timestamp_ms: int
) -> AliasOutcome:
    """Merge the user `previous_id` (if there is one) into `user_id` (created if missing) and
    remember `previous_id` for that user. Run inside the caller's transaction."""
    outcome = AliasOutcome()
    target_id = aliases_resolve(product_id, [user_id]).get(user_id, user_id)
    if previous_id in (user_id, target_id):
        return outcome
    target = users_lock_or_create(product_id, {target_id}, with_traits={target_id})[target_id]
    alias, created = UserAlias.objects.get_or_create(
        product_id=product_id, previous_id=previous_id, defaults={"user_id": target.id}
    )
    if not created and alias.user_id != target.id:
        return outcome  # the first alias of a previous id stands
    outcome.users_touched.add(target.id)
    previous = (
        User.objects.select_for_update()
        .filter(product_id=product_id, tracking_id=previous_id)
        .first()
    )
    if previous is None:
        return outcome
    # Ids merged into the previous user follow it (alias a → b, then b → c: a is c's).
    UserAlias.objects.filter(product_id=product_id, user_id=previous.id).update(user_id=target.id)
    now = timezone.now()
    for key, value in previous.traits.items():
        merge_traits(target, {key: value}, previous.trait_times.get(key, 0))
    target.identified = target.identified or previous.identified
    if previous.first_seen_at and (
        target.first_seen_at is None or previous.first_seen_at < target.first_seen_at
    ):
        target.first_seen_at = previous.first_seen_at
    target.changed = True
    users_write([target], now)
    if previous.last_seen_at:
        User.objects.filter(id=target.id, last_seen_at__lt=previous.last_seen_at).update(
            last_seen_at=previous.last_seen_at
        )
        User.objects.filter(id=target.id, last_seen_at__isnull=True).update(
            last_seen_at=previous.last_seen_at
        )
    outcome.accounts_touched |= _events_move(product_id, previous.id, target.id, now)
    outcome.accounts_touched |= _links_move(previous.id, target.id)
    _history_move(previous.id, target.id)
    _previous_delete(previous)
    EventActivity.objects.create(
        product_id=product_id,
        applied_at=now,
        user_ids=[target.id],
        account_ids=sorted(outcome.accounts_touched),
    )
    return outcome


# The previous user's rollups, added to the target's rows of the same event, day and account.
_ROLLUPS_MERGE = rollups_merge(
    """SELECT product_id, %s, account_id, account_key, event_name, day, count, last_at, %s
    FROM engagement_eventrollup WHERE product_id = %s AND user_id = %s"""
)


def _events_move(product_id: int, previous_id: int, target_id: int, now: datetime) -> set[int]:
    """Raw events and rollups onto the target; the accounts they count for. Past days the
    history has computed are noted stale (ScoreHistoryBackfill), as for backdated events."""
    rollups = EventRollup.objects.filter(product_id=product_id, user_id=previous_id)
    days = rollups.aggregate(first=Min("day"), last=Max("day"))
    if days["first"] is None:
        return set()
    accounts = set(rollups.exclude(account_id__isnull=True).values_list("account_id", flat=True))
    adapt = connection.ops.adapt_datetimefield_value
    start = datetime.combine(days["first"], time.min, tzinfo=UTC)
    end = datetime.combine(days["last"], time.min, tzinfo=UTC) + timedelta(days=1)
    # Raw events have no index but their key: the rollups say which days (partitions) hold them.
    execute(
        "UPDATE engagement_event SET user_id = %s WHERE product_id = %s AND user_id = %s "
        "AND timestamp >= %s AND timestamp < %s",
        [target_id, product_id, previous_id, adapt(start), adapt(end)],
    )
    execute(_ROLLUPS_MERGE, [target_id, adapt(now), product_id, previous_id])
    rollups.delete()
    if days["first"] < backfill_before(now):
        workspaces = Workspace.objects.filter(product_id=product_id).values_list("id", flat=True)
        ScoreHistoryBackfill.objects.bulk_create(
            ScoreHistoryBackfill(workspace_id=w, from_day=days["first"], noted_at=now)
            for w in workspaces
        )
    return accounts


def _links_move(previous_id: int, target_id: int) -> set[int]:
    """The previous user's account links onto the target (the later link time where both)."""
    target_links = dict(
        Membership.objects.filter(user_id=target_id).values_list("account_id", "linked_at")
    )
    accounts = set()
    for link in Membership.objects.filter(user_id=previous_id):
        accounts.add(link.account_id)
        if link.account_id not in target_links:
            link.user_id = target_id
            link.save(update_fields=["user"])
        elif link.linked_at > target_links[link.account_id]:
            Membership.objects.filter(user_id=target_id, account_id=link.account_id).update(
                linked_at=link.linked_at
            )
    return accounts


def _history_move(previous_id: int, target_id: int) -> None:
    """The previous user's daily scores onto the target where it has none for that day (the
    days both have are recomputed by the history's backfill)."""
    taken = set(UserScoreDay.objects.filter(user_id=target_id).values_list("workspace_id", "day"))
    moved = [
        UserScoreDay(
            user_id=target_id,
            workspace_id=row.workspace_id,
            day=row.day,
            engagement_score=row.engagement_score,
            raw_score=row.raw_score,
        )
        for row in UserScoreDay.objects.filter(user_id=previous_id)
        if (row.workspace_id, row.day) not in taken
    ]
    UserScoreDay.objects.bulk_create(moved)


def _previous_delete(previous: User) -> None:
    """The previous user and what still refers to it (its live scores, segment memberships,
    links to accounts the target already had), without the ORM scanning raw events."""
    dependents_delete(previous, handled=(Event, EventRollup))
    execute("DELETE FROM engagement_user WHERE id = %s", [previous.id])
