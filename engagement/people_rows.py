"""The user and account rows messages_apply works on: locked (or created) in bulk, in one order
so that concurrent writers never deadlock; traits merged key by key, the latest time winning;
written back in bulk; and the links between them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection
from django.utils import timezone

from engagement import bulk
from engagement.backends import database_backend
from engagement.models import Account, Membership, User
from engagement.presentation import account_name_key, natural_sort_key, user_name_key
from engagement.track_staging import StagedTracks

IN_CHUNK = 5000


def ms_to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def chunks(values: Sequence, size: int = IN_CHUNK) -> Iterable[Sequence]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


@dataclass(slots=True)
class UserState:
    id: int
    identified: bool
    first_seen_at: datetime | None
    traits: dict | None = None  # loaded only for users whose traits this batch merges
    trait_times: dict | None = None
    changed: bool = False  # traits, identity, first seen or links: written back
    tracking_id: str = ""  # for the name key when the traits name no one


@dataclass(slots=True)
class AccountState:
    id: int
    identified: bool
    traits: dict | None = None
    trait_times: dict | None = None
    changed: bool = False
    created: bool = False  # made by this call, as not yet identified
    tracking_id: str = ""  # for the name key when the traits name none


def users_lock_or_create(
    product_id: int, tracking_ids: set[str], *, with_traits: set[str]
) -> dict[str, UserState]:
    """The users with these tracking ids, created (not yet identified) when missing, all locked
    in one id-ordered statement; traits are read only for those in `with_traits`."""
    if not tracking_ids:
        return {}
    columns = ("id", "tracking_id", "identified", "first_seen_at")
    rows = bulk.select_in(
        User, columns, product_id=product_id, tracking_ids=tracking_ids, lock=True
    )
    missing = tracking_ids - {row[1] for row in rows}
    if missing:
        now = timezone.now()
        bulk.insert_ignoring_conflicts(
            User,
            (
                "product",
                "tracking_id",
                "traits",
                "trait_times",
                "identified",
                "email",
                "name_key",
                "created_at",
                "updated_at",
            ),
            [
                (product_id, tid, {}, {}, False, "", natural_sort_key(tid), now, now)
                for tid in sorted(missing)
            ],
        )
        rows += bulk.select_in(
            User, columns, product_id=product_id, tracking_ids=missing, lock=True
        )
    users = {
        tid: UserState(uid, identified, first_seen, tracking_id=tid)
        for uid, tid, identified, first_seen in rows
    }
    if with_traits:
        for tid, traits, trait_times in bulk.select_in(
            User,
            ("tracking_id", "traits", "trait_times"),
            product_id=product_id,
            tracking_ids=with_traits,
            lock=False,
        ):
            users[tid].traits, users[tid].trait_times = traits, trait_times
    return users


def accounts_lock_or_create(
    product_id: int, tracking_ids: set[str], *, lock: set[str]
) -> dict[str, AccountState]:
    """The accounts with these tracking ids, created when missing; those in `lock` (the ones
    whose row this batch changes) are locked with their traits read, the rest only looked up."""
    if not tracking_ids:
        return {}
    found: dict[str, AccountState] = {}

    def load(ids: set[str]) -> None:
        if ids & lock:
            for aid, tid, identified, traits, trait_times in bulk.select_in(
                Account,
                ("id", "tracking_id", "identified", "traits", "trait_times"),
                product_id=product_id,
                tracking_ids=ids & lock,
                lock=True,
            ):
                found[tid] = AccountState(aid, identified, traits, trait_times, tracking_id=tid)
        if ids - lock:
            for aid, tid, identified in bulk.select_in(
                Account,
                ("id", "tracking_id", "identified"),
                product_id=product_id,
                tracking_ids=ids - lock,
                lock=False,
            ):
                found[tid] = AccountState(aid, identified, tracking_id=tid)

    load(tracking_ids)
    missing = tracking_ids - found.keys()
    if missing:
        now = timezone.now()
        bulk.insert_ignoring_conflicts(
            Account,
            (
                "product",
                "tracking_id",
                "traits",
                "trait_times",
                "identified",
                "name_key",
                "created_at",
                "updated_at",
            ),
            [
                (product_id, tid, {}, {}, False, natural_sort_key(tid), now, now)
                for tid in sorted(missing)
            ],
        )
        load(missing)
        for tid in missing & found.keys():
            found[tid].created = True
    return found


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def merge_traits(obj: UserState | AccountState, traits: dict, timestamp_ms: int) -> bool:
    """Per key, the value with the later message time wins; ties go to the larger value so
    that the outcome never depends on the order in which messages are applied."""
    stored, times = obj.traits, obj.trait_times
    if stored is None or times is None:
        raise ValueError(f"the traits of {obj.id} were not loaded")
    changed = False
    for key, value in traits.items():
        previous_ms = times.get(key)
        if previous_ms is not None:
            if timestamp_ms < previous_ms:
                continue
            if timestamp_ms == previous_ms and _canonical(value) <= _canonical(stored.get(key)):
                continue
        stored[key] = value
        times[key] = timestamp_ms
        changed = True
    return changed


def _user_email(traits: dict) -> str:
    email = traits.get("email")
    return email[:320] if isinstance(email, str) else ""


_LINK_ASSIGNMENTS = """
    linked_at = CASE WHEN excluded.linked_at > engagement_membership.linked_at
                     THEN excluded.linked_at ELSE engagement_membership.linked_at END
"""


def links_upsert(links: dict[tuple[int, int], datetime]) -> None:
    """Create the user-account links, or move an existing link's time forward."""
    now = timezone.now()
    bulk.upsert(
        Membership,
        ("user", "account", "linked_at", "created_at"),
        [(user_id, account_id, when, now) for (user_id, account_id), when in sorted(links.items())],
        conflict=("user", "account"),
        assignments=_LINK_ASSIGNMENTS,
    )


# The (user, account) pairs that staged tracks (engagement/track_staging) name together and that
# have no link yet, each with the latest time of those tracks: one statement per call, whatever the
# number of tracks, and in the steady state no rows (the pairs are linked already). Parameters
# `users` and `accounts` map tracking ids to ids as in event_store.staged_events_select.
_STAGED_PAIRS_UNLINKED = """
    WITH named (user_tid, group_tid, ms) AS (
            SELECT user_tracking_id, account_tracking_id, max(timestamp_ms) FROM {staged}
            WHERE account_tracking_id IS NOT NULL
            GROUP BY user_tracking_id, account_tracking_id),
         users AS ({users}),
         accounts AS ({accounts})
    SELECT users.id, accounts.id, max(named.ms)
    FROM named
    JOIN users ON users.tid = named.user_tid
    JOIN accounts ON accounts.tid = named.group_tid
    WHERE NOT EXISTS (SELECT 1 FROM engagement_membership m
                      WHERE m.user_id = users.id AND m.account_id = accounts.id)
    GROUP BY users.id, accounts.id"""


def staged_links_missing(
    users: dict[str, int], accounts: dict[str, int]
) -> dict[tuple[int, int], datetime]:
    """The links that the staged tracks naming an account (`context.groupId`) call for: their
    user and that account, where the two are not linked yet, at the latest time of those tracks.
    `users` and `accounts` map the staged tracking ids to ids. Written with links_upsert, as a
    group call's links are, so a track links exactly as a group call without traits would; a
    link that exists already is left as it is (its time is the calls', not every track's)."""
    if not accounts:
        return {}
    dialect = database_backend().dialect
    sql = _STAGED_PAIRS_UNLINKED.format(
        staged=StagedTracks.TABLE,
        users=dialect.json_object_rows("%(users)s"),
        accounts=dialect.json_object_rows("%(accounts)s"),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"users": json.dumps(users), "accounts": json.dumps(accounts)})
        rows = cursor.fetchall()
    return {(user_id, account_id): ms_to_datetime(ms) for user_id, account_id, ms in rows}


# Which account an event counts for when its message names none: its user's most recently
# linked account (ties: the larger account id). The one definition of the rule, as SQL both
# databases run, for the users `{users}` selects (a subquery): event_store.staged_events_select.
LATEST_LINKED_ACCOUNTS = """
    SELECT m.user_id, m.account_id FROM engagement_membership m
    WHERE m.user_id IN ({users}) AND NOT EXISTS (
        SELECT 1 FROM engagement_membership n
        WHERE n.user_id = m.user_id
          AND (n.linked_at > m.linked_at
               OR (n.linked_at = m.linked_at AND n.account_id > m.account_id)))"""


def users_write(users: Iterable[UserState], now: datetime) -> None:
    changed = sorted((u for u in users if u.changed), key=lambda u: u.id)
    bulk.update_by_id(
        User,
        ("identified", "first_seen_at", "updated_at"),
        [(u.id, u.identified, u.first_seen_at, now) for u in changed],
    )
    bulk.update_by_id(
        User,
        ("traits", "trait_times", "email", "name_key"),
        [
            (
                u.id,
                traits,
                u.trait_times,
                _user_email(traits),
                user_name_key(traits, _user_email(traits), u.tracking_id),
            )
            for u in changed
            if (traits := u.traits) is not None
        ],
    )


def accounts_write(accounts: Iterable[AccountState], now: datetime) -> None:
    changed = sorted((a for a in accounts if a.changed), key=lambda a: a.id)
    bulk.update_by_id(
        Account,
        ("identified", "traits", "trait_times", "name_key", "updated_at"),
        [
            (
                a.id,
                a.identified,
                a.traits,
                a.trait_times,
                account_name_key(a.traits, a.tracking_id),
                now,
            )
            for a in changed
            if a.traits is not None
        ],
    )
    bulk.update_by_id(
        Account,
        ("identified", "updated_at"),
        [(a.id, a.identified, now) for a in changed if a.traits is None],
    )
