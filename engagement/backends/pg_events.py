"""PostgreSQL's event store: COPY into a session table, then set-based SQL (engagement/
event_store.py says what is stored); the tallies' fold; the daily partitions of the raw events."""

# SQL is assembled from fixed table names and constants; every value is a query parameter.
# ruff: noqa: S608

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from django.utils import timezone

from engagement.event_store import (
    StagedTrackIds,
    StoredEvents,
    backfill_before,
    new_names,
    rollups_merge,
    staged_events_select,
)
from engagement.scoring.dialect import Dialect

_STAGE = "eds_stage_event"
_COPY_SPECIALS = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_text(value: str) -> str:
    """A value as a field of PostgreSQL's COPY text format."""
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
    rollups_merge(
        f"""SELECT %(product)s, user_id, account_id, COALESCE(account_id, 0), name,
               ({_TS} AT TIME ZONE 'UTC')::date AS day, count(*), max({_TS}), %(now)s
        FROM {_STAGE}
        GROUP BY user_id, account_id, name, day
        ORDER BY user_id, name, day, COALESCE(account_id, 0)"""
    ),
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


def staged_tracks_add(cursor, table: str, columns: Sequence[str], rows: Sequence) -> None:
    """Tracks into the staging table as COPY text: one line of text per track."""
    text = "".join(
        [
            f"{copy_text(user)}\t{_NULL if account is None else copy_text(account)}\t"
            f"{copy_text(name)}\t{ms}\n"
            for user, account, name, ms in rows
        ]
    )
    with cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        copy.write(text)


def events_store(cursor, product_id: int, staged: StagedTrackIds) -> tuple[StoredEvents, set[str]]:
    # This transaction's only (ON COMMIT DROP: nothing outlives it, so a transaction pooler may
    # hand the next one any server session); the TRUNCATE keeps each call's rows its own.
    cursor.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE} (user_id bigint NOT NULL, "
        "account_id bigint, name text NOT NULL, ms bigint NOT NULL) ON COMMIT DROP"
    )
    cursor.execute(f"TRUNCATE {_STAGE}")
    cursor.execute(
        f"INSERT INTO {_STAGE} (user_id, account_id, name, ms) "
        + staged_events_select(Dialect("postgresql")),
        {"users": json.dumps(staged.users), "accounts": json.dumps(staged.accounts)},
    )
    if not cursor.rowcount:
        return StoredEvents(), set()
    count = cursor.rowcount
    now = timezone.now()
    params = {"product": product_id, "now": now, "backfill_before": backfill_before(now)}
    for statement in _PG_STATEMENTS:
        cursor.execute(statement, params)
    cursor.execute(f"SELECT DISTINCT name, account_id FROM {_STAGE}")  # noqa: S608
    pairs = cursor.fetchall()
    names = {name for name, _ in pairs}
    if new_names(product_id, names):
        cursor.execute(_PG_NAMES, params)
    return StoredEvents(count, frozenset(a for _, a in pairs if a is not None)), names


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


def event_tallies_compact(cursor) -> int:
    cursor.execute(_PG_FOLD_TALLIES)
    return cursor.fetchone()[0]


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


def partitions_maintain(
    cursor, *, today: date, days_ahead: int, retention_days: int
) -> dict[str, int]:
    """Create a daily partition for today and the next `days_ahead` days (moving in any rows
    the DEFAULT partition already holds for that day), drop the daily partitions older than
    `retention_days`, and delete older rows elsewhere. Rollups are never touched."""
    cutoff = today - timedelta(days=retention_days)
    created = dropped = 0
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
            f"ALTER TABLE engagement_event ATTACH PARTITION {name} FOR VALUES FROM (%s) TO (%s)",
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
