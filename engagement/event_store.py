"""Storing tracked events: the raw rows, their daily rollups, the product's event names, and the
users' first and last seen times. The busiest write of the service.

Events come from the staged tracks (track_staging), and which account each counts for is decided
here, once, in SQL on every database (STAGED_EVENTS). What is stored is said here; how is the
database backend's (engagement/backends): on PostgreSQL everything is derived from the staged
events by set-based SQL, with no Python object per event; on SQLite (the embedded mode) the same
results come from Python aggregation and multi-row statements.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.db.models import Min

from engagement.backends import database_backend
from engagement.models import EventRollup, Product
from engagement.people_rows import LATEST_LINKED_ACCOUNTS
from engagement.track_staging import StagedTracks

if TYPE_CHECKING:
    from engagement.scoring.dialect import Dialect

# (user id, account id or None, event name, Unix milliseconds)
NewEvent = tuple[int, int | None, str, int]

_UNLINKED_USERS = (
    "SELECT users.id FROM tracks t JOIN users ON users.tid = t.user_tid WHERE t.group_tid IS NULL"
)


def staged_events_select(dialect: Dialect) -> str:
    """The staged tracks as events (user_id, account_id, name, ms), parameters `users` and
    `accounts` (StagedTrackIds, bound as JSON objects of tracking id to id). An event counts for
    the account its track names, else its user's most recently linked account
    (people_rows.LATEST_LINKED_ACCOUNTS, looked up once per user)."""
    return f"""
    WITH tracks (user_tid, group_tid, name, ms) AS (
            SELECT {", ".join(StagedTracks.COLUMNS)} FROM {StagedTracks.TABLE}),
         users AS ({dialect.json_object_rows("%(users)s")}),
         accounts AS ({dialect.json_object_rows("%(accounts)s")}),
         latest AS ({LATEST_LINKED_ACCOUNTS.format(users=_UNLINKED_USERS)})
    SELECT users.id AS user_id, COALESCE(accounts.id, latest.account_id) AS account_id,
           t.name, t.ms
    FROM tracks t
    JOIN users ON users.tid = t.user_tid
    LEFT JOIN accounts ON accounts.tid = t.group_tid
    LEFT JOIN latest ON latest.user_id = users.id AND t.group_tid IS NULL"""  # noqa: S608


# Event names already recorded, per process: most batches then skip that statement.
_known_event_names: set[tuple[int, str]] = set()


@dataclass(frozen=True, slots=True)
class StagedTrackIds:
    """The ids of the users and accounts the staged tracks name (see track_staging), by tracking
    id: the events of those tracks are stored along with the caller's."""

    users: dict[str, int]
    accounts: dict[str, int]


@dataclass(frozen=True, slots=True)
class StoredEvents:
    count: int = 0
    account_ids: frozenset[int] = frozenset()


# A rollup row added to the stored row of its key: the counts add up, the later time stays.
# Every write that adds to the rollups (events stored, an alias merged, an erased account's
# rollups unlinked) merges by these assignments, on both databases.
ROLLUP_ADDED = """count = engagement_eventrollup.count + excluded.count,
        last_at = CASE WHEN excluded.last_at > engagement_eventrollup.last_at
                       THEN excluded.last_at ELSE engagement_eventrollup.last_at END,
        updated_at = excluded.updated_at"""


def rollups_merge(select: str) -> str:
    """An INSERT of `select`'s rows (product_id, user_id, account_id, account_key, event_name,
    day, count, last_at, updated_at) into the daily rollups, each added to the stored row of
    its key (ROLLUP_ADDED)."""
    return f"""
    INSERT INTO engagement_eventrollup
        (product_id, user_id, account_id, account_key, event_name, day, count, last_at, updated_at)
    {select}
    ON CONFLICT (product_id, user_id, event_name, day, account_key) DO UPDATE SET
        {ROLLUP_ADDED}"""


def events_store(*, product_id: int, staged: StagedTrackIds) -> StoredEvents:
    """Store the staged tracks (see track_staging) as events, whose users and accounts `staged`
    maps to ids (staged_events_select): the raw rows, their rollups, the day's tallies, the
    activity scoring reads, the history's backfill notes, and first and last seen."""
    stored, names = database_backend().events_store(product_id, staged)
    if names:
        # Remembered once committed: a rolled-back apply must not hide a name it never stored.
        known = {(product_id, name) for name in names}
        transaction.on_commit(lambda: _known_event_names.update(known))
    return stored


def new_names(product_id: int, names: Iterable[str]) -> bool:
    """True when a name may be new to the product (this process has not recorded it)."""
    return any((product_id, name) not in _known_event_names for name in names)


def backfill_before(now: datetime) -> date:
    """A batch with events of a day before this one marks that day stale in the score history.

    Any past day, and today when midnight is less than the scoring overlap away: a batch that
    commits that late may land after the history's daily step has computed the day without it."""
    overlap = timedelta(seconds=settings.SCORING_WATERMARK_OVERLAP_SECONDS)
    return (now + overlap).astimezone(UTC).date()


# --- Daily tallies -----------------------------------------------------------------------------


def event_tallies_compact() -> int:
    """Fold the tally rows of each (product, day, event name) into one, or none when they sum
    to 0; returns the rows removed. The sums read by the overview are unchanged."""
    return database_backend().event_tallies_compact()


def partitions_maintain(*, today: date, days_ahead: int, retention_days: int) -> dict[str, int]:
    """Create a daily partition for today and the next `days_ahead` days (moving in any rows
    the DEFAULT partition already holds for that day), drop the daily partitions older than
    `retention_days`, and delete older rows elsewhere (PostgreSQL); elsewhere delete the raw
    events older than `retention_days`. Rollups are never touched."""
    return database_backend().partitions_maintain(
        today=today, days_ahead=days_ahead, retention_days=retention_days
    )


# --- Rollups' order ----------------------------------------------------------------------------

# How far back past days are ordered: the two windows a full rescore reads at the longest
# lookback (30 days each) and the 30 days of a history build beyond them.
ROLLUPS_ORDER_REACH_DAYS = 90


def rollups_order_past_days(*, today: date, days_per_product: int) -> dict[str, int]:
    """Store each product's rollups of the days that ended since its last run again in user
    order (DatabaseBackend.rollups_order), oldest first, at most `days_per_product` days each
    and none older than ROLLUPS_ORDER_REACH_DAYS; `Product.rollups_ordered_through` records
    the last day done. Late events that reach an ordered day are stored where they land. A day
    whose rollups stayed locked by writers is tried again next time. Returns the days ordered,
    the rows moved and the products whose turn was put off."""
    yesterday = today - timedelta(days=1)
    earliest = today - timedelta(days=ROLLUPS_ORDER_REACH_DAYS)
    backend = database_backend()
    done = {"days": 0, "rows": 0, "put_off": 0}
    for product in Product.objects.order_by("id"):
        ordered = product.rollups_ordered_through
        if ordered is None:  # the first run: from its first rollup within reach
            first = EventRollup.objects.filter(product_id=product.id).aggregate(day=Min("day"))
            ordered = max(earliest, first["day"] or yesterday) - timedelta(days=1)
        day = max(earliest, ordered + timedelta(days=1))
        for _ in range(days_per_product):
            if day > yesterday:
                break
            moved = backend.rollups_order(product.id, day)
            if moved is None:
                done["put_off"] += 1
                break
            Product.objects.filter(id=product.id).update(rollups_ordered_through=day)
            done["days"] += 1
            done["rows"] += moved
            day += timedelta(days=1)
    return done
