"""Storing tracked events: the raw rows, their daily rollups, the product's event names, and the
users' first and last seen times. The busiest write of the service.

What is stored is said here; how is the database backend's (engagement/backends): on PostgreSQL
the events are formatted once as COPY text into a session-local staging table and everything
else is derived from it by set-based SQL, so the work per event in Python is one line of text;
on SQLite (the embedded mode) the same results come from Python aggregation and multi-row
statements.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import transaction

from engagement.backends import database_backend

# (user id, account id or None, event name, Unix milliseconds)
NewEvent = tuple[int, int | None, str, int]

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


def events_store(
    *, product_id: int, events: Sequence[NewEvent], staged: StagedTrackIds | None = None
) -> StoredEvents:
    """Store these events and, on PostgreSQL with `staged`, the staged tracks (see
    track_staging), whose users and accounts `staged` maps to ids; a staged track without an
    account counts for its user's most recently linked account."""
    if not events and staged is None:
        return StoredEvents()
    stored, names = database_backend().events_store(product_id, events, staged)
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
