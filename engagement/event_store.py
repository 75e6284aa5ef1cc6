"""Storing tracked events: the raw rows, their daily rollups, the product's event names, and the
users' first and last seen times. The busiest write of the service.

On PostgreSQL the events are formatted once as COPY text into a session-local staging table and
everything else is derived from it by set-based SQL, so the work per event in Python is one
line of text. Elsewhere (SQLite, the embedded mode) the same results come from Python
aggregation and multi-row statements.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from engagement import bulk
from engagement.models import (
    Event,
    EventActivity,
    EventDayTally,
    EventName,
    EventRollup,
    ScoreHistoryBackfill,
    User,
    Workspace,
)
from engagement.track_staging import StagedTracks

# (user id, account id or None, event name, Unix milliseconds)
NewEvent = tuple[int, int | None, str, int]

_STAGE = "eds_stage_event"
_COPY_SPECIALS = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
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
    if connection.vendor == "postgresql":
        stored, names = _store_postgresql(product_id, events, staged)
    else:
        if staged is not None:
            raise NotImplementedError("staged tracks need PostgreSQL")
        _store_portable(product_id, events)
        names = {name for _, _, name, _ in events}
        stored = StoredEvents(
            len(events), frozenset(account_id for _, account_id, _, _ in events if account_id)
        )
    if names:
        # Remembered once committed: a rolled-back apply must not hide a name it never stored.
        known = {(product_id, name) for name in names}
        transaction.on_commit(lambda: _known_event_names.update(known))
    return stored


def _new_names(product_id: int, names: Iterable[str]) -> bool:
    return any((product_id, name) not in _known_event_names for name in names)


def _copy_text(value: str) -> str:
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_COPY_SPECIALS)
    return value


# A staged event's time: Unix milliseconds to a timestamp, exactly (no float on the way).
_TS = "('epoch'::timestamptz + ms * interval '1 millisecond')"
_PG_STATEMENTS = [
    # The raw events.
    f"""INSERT INTO engagement_event (product_id, user_id, account_id, name, timestamp)
        SELECT %(product)s, user_id, account_id, name, {_TS} FROM {_STAGE}""",
    # Their daily rollups, in key order so concurrent workers lock rollup rows in one order.
    f"""INSERT INTO engagement_eventrollup
            (product_id, user_id, account_id, account_key, event_name, day, count, last_at,
             updated_at)
        SELECT %(product)s, user_id, account_id, COALESCE(account_id, 0), name,
               ({_TS} AT TIME ZONE 'UTC')::date AS day, count(*), max({_TS}), %(now)s
        FROM {_STAGE}
        GROUP BY user_id, account_id, name, day
        ORDER BY user_id, name, day, COALESCE(account_id, 0)
        ON CONFLICT (product_id, user_id, event_name, day, account_key) DO UPDATE SET
            count = engagement_eventrollup.count + excluded.count,
            updated_at = excluded.updated_at,
            last_at = GREATEST(engagement_eventrollup.last_at, excluded.last_at)""",
    # The product's events per day and name for the overview, appended (see EventDayTally).
    f"""INSERT INTO engagement_eventdaytally (product_id, day, event_name, count)
        SELECT %(product)s, ({_TS} AT TIME ZONE 'UTC')::date AS day, name, count(*)
        FROM {_STAGE} GROUP BY day, name""",
    # What scoring rescores next: the batch's users and accounts, one row for the batch; and,
    # when the batch reaches back to a past day, that day for each workspace's score history.
    f"""WITH batch AS (
            SELECT jsonb_agg(DISTINCT user_id) AS users,
                COALESCE(jsonb_agg(DISTINCT account_id) FILTER (WHERE account_id IS NOT NULL),
                         '[]'::jsonb) AS accounts,
                min(({_TS} AT TIME ZONE 'UTC')::date) AS first_day
            FROM {_STAGE}),
        activity AS (
            INSERT INTO engagement_eventactivity (product_id, applied_at, user_ids, account_ids)
            SELECT %(product)s, %(now)s, users, accounts FROM batch)
        INSERT INTO engagement_scorehistorybackfill (workspace_id, from_day, noted_at)
        SELECT w.id, b.first_day, %(now)s FROM batch b
        JOIN engagement_workspace w ON w.product_id = %(product)s
        WHERE b.first_day < %(backfill_before)s""",
    # First and last seen (the users are already locked by the caller).
    f"""UPDATE engagement_user AS u
        SET first_seen_at = LEAST(u.first_seen_at, s.first_at),
            last_seen_at = GREATEST(u.last_seen_at, s.last_at)
        FROM (SELECT user_id, min({_TS}) AS first_at, max({_TS}) AS last_at
              FROM {_STAGE} GROUP BY user_id) AS s
        WHERE u.id = s.user_id
          AND (u.first_seen_at IS NULL OR s.first_at < u.first_seen_at
               OR u.last_seen_at IS NULL OR s.last_at > u.last_seen_at)""",
]
_PG_NAMES = f"""INSERT INTO engagement_eventname (product_id, name, first_seen_at)
    SELECT DISTINCT %(product)s, name, %(now)s FROM {_STAGE} ORDER BY 2
    ON CONFLICT (product_id, name) DO NOTHING"""
_NULL = "\\N"
# The staged tracks to staged events: tracking ids to ids (the caller's maps, bound as JSON), and
# an event without an account to its user's latest link, looked up once per user.
_FROM_TRACKS = f"""
    WITH tracks (user_tid, group_tid, name, ms) AS (
            SELECT {", ".join(StagedTracks.COLUMNS)} FROM {StagedTracks.TABLE}),
         users AS (
            SELECT tid, id::bigint AS id FROM jsonb_each_text(%(users)s::jsonb) AS u(tid, id)),
         accounts AS (
            SELECT tid, id::bigint AS id FROM jsonb_each_text(%(accounts)s::jsonb) AS a(tid, id)),
         latest AS (
            SELECT DISTINCT ON (m.user_id) m.user_id, m.account_id
            FROM engagement_membership m
            WHERE m.user_id IN (SELECT users.id FROM tracks t
                                JOIN users ON users.tid = t.user_tid WHERE t.group_tid IS NULL)
            ORDER BY m.user_id, m.linked_at DESC, m.account_id DESC)
    INSERT INTO {_STAGE} (user_id, account_id, name, ms)
    SELECT users.id, COALESCE(accounts.id, latest.account_id), t.name, t.ms
    FROM tracks t
    JOIN users ON users.tid = t.user_tid
    LEFT JOIN accounts ON accounts.tid = t.group_tid
    LEFT JOIN latest ON latest.user_id = users.id AND t.group_tid IS NULL"""


def _store_postgresql(
    product_id: int, events: Sequence[NewEvent], staged: StagedTrackIds | None
) -> tuple[StoredEvents, set[str]]:
    with connection.cursor() as cursor:
        # Session-local; ON COMMIT DELETE ROWS and the TRUNCATE keep each call's rows its own.
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE} (user_id bigint NOT NULL, "
            "account_id bigint, name text NOT NULL, ms bigint NOT NULL) ON COMMIT DELETE ROWS"
        )
        cursor.execute(f"TRUNCATE {_STAGE}")
        if events:
            text = "".join(
                [
                    f"{user_id}\t{_NULL if account_id is None else account_id}\t"
                    f"{_copy_text(name)}\t{ms}\n"
                    for user_id, account_id, name, ms in events
                ]
            )
            with cursor.cursor.copy(f"COPY {_STAGE} FROM STDIN") as copy:
                copy.write(text)
        count = len(events)
        if staged is not None:
            cursor.execute(
                _FROM_TRACKS,
                {"users": json.dumps(staged.users), "accounts": json.dumps(staged.accounts)},
            )
            count += cursor.rowcount
        if not count:
            return StoredEvents(), set()
        now = timezone.now()
        params = {"product": product_id, "now": now, "backfill_before": _backfill_before(now)}
        for statement in _PG_STATEMENTS:
            cursor.execute(statement, params)
        cursor.execute(f"SELECT DISTINCT name, account_id FROM {_STAGE}")  # noqa: S608
        pairs = cursor.fetchall()
        names = {name for name, _ in pairs}
        if _new_names(product_id, names):
            cursor.execute(_PG_NAMES, params)
    return StoredEvents(count, frozenset(a for _, a in pairs if a is not None)), names


def _backfill_before(now: datetime) -> date:
    """A batch with events of a day before this one marks that day stale in the score history.

    Any past day, and today when midnight is less than the scoring overlap away: a batch that
    commits that late may land after the history's daily step has computed the day without it."""
    overlap = timedelta(seconds=settings.SCORING_WATERMARK_OVERLAP_SECONDS)
    return (now + overlap).astimezone(UTC).date()


def _store_portable(product_id: int, events: Sequence[NewEvent]) -> None:
    now = timezone.now()
    rows = [
        (user_id, account_id, name, datetime.fromtimestamp(ms / 1000, tz=UTC))
        for user_id, account_id, name, ms in events
    ]
    bulk.insert(
        Event,
        ("product", "user", "account", "name", "timestamp"),
        [(product_id, *row) for row in rows],
    )
    totals: dict[tuple, list] = {}
    seen: dict[int, list[datetime]] = {}
    for user_id, account_id, name, when in rows:
        key = (user_id, account_id or 0, name, when.date())
        entry = totals.setdefault(key, [0, when])
        entry[0] += 1
        entry[1] = max(entry[1], when)
        first_last = seen.setdefault(user_id, [when, when])
        first_last[0], first_last[1] = min(first_last[0], when), max(first_last[1], when)
    bulk.upsert(
        EventRollup,
        (
            "product",
            "user",
            "account",
            "account_key",
            "event_name",
            "day",
            "count",
            "last_at",
            "updated_at",
        ),
        [
            (product_id, user_id, key or None, key, name, day, count, last_at, now)
            for (user_id, key, name, day), (count, last_at) in sorted(totals.items())
        ],
        conflict=("product", "user", "event_name", "day", "account_key"),
        assignments="""count = engagement_eventrollup.count + excluded.count,
            updated_at = excluded.updated_at,
            last_at = CASE WHEN excluded.last_at > engagement_eventrollup.last_at
                           THEN excluded.last_at ELSE engagement_eventrollup.last_at END""",
    )
    tallies: dict[tuple[date, str], int] = {}
    for (_, _, name, day), (count, _) in totals.items():
        tallies[(day, name)] = tallies.get((day, name), 0) + count
    bulk.insert(
        EventDayTally,
        ("product", "day", "event_name", "count"),
        [(product_id, day, name, count) for (day, name), count in sorted(tallies.items())],
    )
    bulk.insert(
        EventActivity,
        ("product", "applied_at", "user_ids", "account_ids"),
        [
            (
                product_id,
                now,
                sorted(seen),
                sorted({account_id for _, account_id, _, _ in rows if account_id}),
            )
        ],
    )
    first_day = min(day for _, _, _, day in totals)
    if first_day < _backfill_before(now):
        bulk.insert(
            ScoreHistoryBackfill,
            ("workspace", "from_day", "noted_at"),
            [
                (workspace_id, first_day, now)
                for workspace_id in Workspace.objects.filter(product_id=product_id)
                .order_by("id")
                .values_list("id", flat=True)
            ],
        )
    bulk.update_by_id(
        User,
        ("first_seen_at", "last_seen_at"),
        [(user_id, first, last) for user_id, (first, last) in sorted(seen.items())],
        assignments="""first_seen_at = CASE WHEN first_seen_at IS NULL OR first_seen_at > eds_new.c1
                                            THEN eds_new.c1 ELSE first_seen_at END,
            last_seen_at = CASE WHEN last_seen_at IS NULL OR last_seen_at < eds_new.c2
                                THEN eds_new.c2 ELSE last_seen_at END""",
    )
    if _new_names(product_id, {name for _, _, name, _ in events}):
        bulk.insert_ignoring_conflicts(
            EventName,
            ("product", "name", "first_seen_at"),
            [(product_id, name, now) for name in sorted({name for _, _, name, _ in events})],
        )


# --- Daily tallies -----------------------------------------------------------------------------

# One statement: a concurrent compaction waits on the rows this one deletes and then skips them,
# so no count is folded twice; batches appended meanwhile stay as they are. A key whose rows sum
# to nothing (an erased user's events were its only ones) is folded away, so the overview's top
# events no longer name it.
_PG_FOLD_TALLIES = """
    WITH folded AS (
        DELETE FROM engagement_eventdaytally t
        WHERE (t.product_id, t.day, t.event_name) IN (
            SELECT product_id, day, event_name FROM engagement_eventdaytally
            GROUP BY product_id, day, event_name HAVING count(*) > 1)
        RETURNING t.product_id, t.day, t.event_name, t.count),
    added AS (
        INSERT INTO engagement_eventdaytally (product_id, day, event_name, count)
        SELECT product_id, day, event_name, SUM(count) FROM folded
        GROUP BY product_id, day, event_name HAVING SUM(count) <> 0
        RETURNING 1)
    SELECT (SELECT count(*) FROM folded) - (SELECT count(*) FROM added)"""
# SQLite has one writer at a time: the rows up to a known id are summed, then deleted.
_PORTABLE_SPLIT_KEYS = """
    SELECT product_id, day, event_name FROM engagement_eventdaytally WHERE id <= %s
    GROUP BY product_id, day, event_name HAVING count(*) > 1"""
_PORTABLE_FOLD_TALLIES = f"""
    INSERT INTO engagement_eventdaytally (product_id, day, event_name, count)
    SELECT product_id, day, event_name, SUM(count) FROM engagement_eventdaytally
    WHERE id <= %s AND (product_id, day, event_name) IN ({_PORTABLE_SPLIT_KEYS})
    GROUP BY product_id, day, event_name HAVING SUM(count) <> 0"""
_PORTABLE_DROP_FOLDED = f"""
    DELETE FROM engagement_eventdaytally
    WHERE id <= %s AND (product_id, day, event_name) IN ({_PORTABLE_SPLIT_KEYS})"""


def event_tallies_compact() -> int:
    """Fold the tally rows of each (product, day, event name) into one, or none when they sum
    to 0; returns the rows removed. The sums read by the overview are unchanged."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(_PG_FOLD_TALLIES)
            return cursor.fetchone()[0]
        last = EventDayTally.objects.order_by("-id").values_list("id", flat=True).first()
        if last is None:
            return 0
        cursor.execute(_PORTABLE_FOLD_TALLIES, [last, last])
        added = cursor.rowcount
        cursor.execute(_PORTABLE_DROP_FOLDED, [last, last])
        return cursor.rowcount - added


# --- Partitions and retention ------------------------------------------------------------------

_PARTITION_PREFIX = "engagement_event_p"


def _partition_name(day: date) -> str:
    return f"{_PARTITION_PREFIX}{day:%Y%m%d}"


def _existing_partitions(cursor) -> dict[str, date]:
    cursor.execute(
        """SELECT c.relname FROM pg_inherits i
           JOIN pg_class c ON c.oid = i.inhrelid
           JOIN pg_class p ON p.oid = i.inhparent
           WHERE p.relname = 'engagement_event'"""
    )
    found = {}
    for (name,) in cursor.fetchall():
        suffix = name.removeprefix(_PARTITION_PREFIX)
        if name.startswith(_PARTITION_PREFIX) and suffix.isdigit() and len(suffix) == 8:
            found[name] = datetime.strptime(suffix, "%Y%m%d").replace(tzinfo=UTC).date()
    return found


def partitions_maintain(*, today: date, days_ahead: int, retention_days: int) -> dict[str, int]:
    """Create a daily partition for today and the next `days_ahead` days (moving in any rows
    the DEFAULT partition already holds for that day), drop the daily partitions older than
    `retention_days`, and delete older rows elsewhere. Rollups are never touched."""
    cutoff = today - timedelta(days=retention_days)
    created = dropped = 0
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            deleted = Event.objects.filter(timestamp__lt=_midnight(cutoff)).delete()[0]
            return {"created": 0, "dropped": 0, "deleted": deleted}
        existing = _existing_partitions(cursor)
        for offset in range(days_ahead + 1):
            day = today + timedelta(days=offset)
            name = _partition_name(day)
            if name in existing:
                continue
            start, end = _midnight(day), _midnight(day + timedelta(days=1))
            # A new partition may not overlap rows in DEFAULT: move them in before attaching.
            cursor.execute(f"CREATE TABLE {name} (LIKE engagement_event INCLUDING DEFAULTS)")
            cursor.execute(
                f"""WITH moved AS (DELETE FROM engagement_event_default
                        WHERE "timestamp" >= %s AND "timestamp" < %s RETURNING *)
                    INSERT INTO {name} SELECT * FROM moved""",
                [start, end],
            )
            cursor.execute(
                f"ALTER TABLE engagement_event ATTACH PARTITION {name} "
                "FOR VALUES FROM (%s) TO (%s)",
                [start, end],
            )
            created += 1
        for name, day in existing.items():
            if day < cutoff:
                cursor.execute(f"DROP TABLE {name}")
                dropped += 1
        cursor.execute(
            'DELETE FROM engagement_event_default WHERE "timestamp" < %s', [_midnight(cutoff)]
        )
        deleted = cursor.rowcount
    return {"created": created, "dropped": dropped, "deleted": deleted}


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)
