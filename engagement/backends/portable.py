"""The portable backend: what SQLite (the embedded mode) runs where PostgreSQL has its own
statements. Python aggregation and multi-row statements; the results are PostgreSQL's."""

# SQL is assembled from fixed table names and model metadata; every value is a parameter.
# ruff: noqa: S608

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, date, datetime, timedelta

from django.db import connection, models
from django.utils import timezone

from engagement import bulk
from engagement.backends import DatabaseBackend, SegmentStatements, portable_scoring
from engagement.event_store import (
    ROLLUP_ADDED,
    NewEvent,
    StagedTrackIds,
    StoredEvents,
    backfill_before,
    new_names,
    staged_events_select,
)
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
from engagement.scoring.dialect import Dialect


def _sqlite_source(fields: list[models.Field], rows: Sequence[Sequence]) -> tuple[str, list]:
    one_row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    names = ", ".join(f"column{index + 1} AS c{index}" for index in range(len(fields)))
    params = [
        None if value is None else field.get_db_prep_save(value, connection)
        for row in rows
        for field, value in zip(fields, row, strict=True)
    ]
    return f"(SELECT {names} FROM (VALUES {', '.join([one_row] * len(rows))}))", params


# An event as stored: user id, account id (None without one), name, time.
_TimedEvent = tuple[int, int | None, str, datetime]
# A rollup row's key: user id, account key (0 without an account), name, day.
_RollupKey = tuple[int, int, str, date]


def _timed_events(events: Sequence[NewEvent]) -> list[_TimedEvent]:
    """The events with their epoch milliseconds as UTC datetimes."""
    return [
        (user_id, account_id, name, datetime.fromtimestamp(ms / 1000, tz=UTC))
        for user_id, account_id, name, ms in events
    ]


def _rollup_totals(
    rows: Sequence[_TimedEvent],
) -> tuple[dict[_RollupKey, list], dict[int, list[datetime]]]:
    """Each rollup key's [count, last time], and each user's [first, last] time in the batch."""
    totals: dict[_RollupKey, list] = {}
    seen: dict[int, list[datetime]] = {}
    for user_id, account_id, name, when in rows:
        key = (user_id, account_id or 0, name, when.date())
        entry = totals.setdefault(key, [0, when])
        entry[0] += 1
        entry[1] = max(entry[1], when)
        first_last = seen.setdefault(user_id, [when, when])
        first_last[0], first_last[1] = min(first_last[0], when), max(first_last[1], when)
    return totals, seen


def _rollups_add(product_id: int, totals: dict[_RollupKey, list], now: datetime) -> None:
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
        assignments=ROLLUP_ADDED,
    )


def _day_tallies_add(product_id: int, totals: dict[_RollupKey, list]) -> None:
    tallies: dict[tuple[date, str], int] = {}
    for (_, _, name, day), (count, _) in totals.items():
        tallies[(day, name)] = tallies.get((day, name), 0) + count
    bulk.insert(
        EventDayTally,
        ("product", "day", "event_name", "count"),
        [(product_id, day, name, count) for (day, name), count in sorted(tallies.items())],
    )


def _activity_note(
    product_id: int, rows: Sequence[_TimedEvent], seen: dict[int, list[datetime]], now: datetime
) -> None:
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


def _score_history_backfill_note(
    product_id: int, totals: dict[_RollupKey, list], now: datetime
) -> None:
    first_day = min(day for _, _, _, day in totals)
    if first_day < backfill_before(now):
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


def _users_seen_update(seen: dict[int, list[datetime]]) -> None:
    bulk.update_by_id(
        User,
        ("first_seen_at", "last_seen_at"),
        [(user_id, first, last) for user_id, (first, last) in sorted(seen.items())],
        assignments="""first_seen_at = CASE WHEN first_seen_at IS NULL OR first_seen_at > eds_new.c1
                                            THEN eds_new.c1 ELSE first_seen_at END,
            last_seen_at = CASE WHEN last_seen_at IS NULL OR last_seen_at < eds_new.c2
                                THEN eds_new.c2 ELSE last_seen_at END""",
    )


def _event_names_note(product_id: int, events: Sequence[NewEvent], now: datetime) -> None:
    if new_names(product_id, {name for _, _, name, _ in events}):
        bulk.insert_ignoring_conflicts(
            EventName,
            ("product", "name", "first_seen_at"),
            [(product_id, name, now) for name in sorted({name for _, _, name, _ in events})],
        )


def _events_store(product_id: int, events: Sequence[NewEvent]) -> None:
    now = timezone.now()
    rows = _timed_events(events)
    bulk.insert(
        Event,
        ("product", "user", "account", "name", "timestamp"),
        [(product_id, *row) for row in rows],
    )
    totals, seen = _rollup_totals(rows)
    _rollups_add(product_id, totals, now)
    _day_tallies_add(product_id, totals)
    _activity_note(product_id, rows, seen, now)
    _score_history_backfill_note(product_id, totals, now)
    _users_seen_update(seen)
    _event_names_note(product_id, events, now)


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


_PORTABLE_LOG_LEAVES = """
    INSERT INTO {changes} (segment_id, account_id, user_id, change, at)
    SELECT %s, m.account_id, m.user_id, 'left', %s {gone}"""
_PORTABLE_LEAVE = "DELETE FROM {members} WHERE id IN (SELECT m.id {gone})"
_PORTABLE_LOG_JOINS = """
    INSERT INTO {changes} (segment_id, {column}, {other}, change, at)
    SELECT %s, q.{column}, NULL, 'joined', %s {new}"""
_PORTABLE_JOIN = """
    INSERT INTO {members} (segment_id, {column}, {other}, joined_at)
    SELECT %s, q.{column}, NULL, %s {new}"""


class PortableBackend(DatabaseBackend):
    vendor = "sqlite"
    bulk_rows = 500  # SQLite binds at most 32,766 values a statement

    @property
    def dialect(self) -> Dialect:
        return Dialect("sqlite")

    def bulk_source(self, fields: list[models.Field], rows: Sequence[Sequence]) -> tuple[str, list]:
        return _sqlite_source(fields, rows)

    def select_in(self, model, columns, *, product_id, tracking_ids, lock) -> list[tuple]:
        found: list[tuple] = []
        ordered = sorted(tracking_ids)
        for start in range(0, len(ordered), 5000):
            chunk = ordered[start : start + 5000]
            query = model.objects.filter(product_id=product_id, tracking_id__in=chunk)
            query = query.order_by("id")
            if lock:
                query = query.select_for_update()
            found.extend(query.values_list(*columns))
        return found

    def events_store(
        self, product_id: int, staged: StagedTrackIds
    ) -> tuple[StoredEvents, set[str]]:
        with connection.cursor() as cursor:
            cursor.execute(
                staged_events_select(self.dialect),
                {"users": json.dumps(staged.users), "accounts": json.dumps(staged.accounts)},
            )
            events: list[NewEvent] = cursor.fetchall()
        if not events:
            return StoredEvents(), set()
        _events_store(product_id, events)
        names = {name for _, _, name, _ in events}
        stored = StoredEvents(
            len(events), frozenset(account_id for _, account_id, _, _ in events if account_id)
        )
        return stored, names

    def staged_tracks_start(self, table: str, columns: str) -> None:
        # Session-local; emptied here, since SQLite has no ON COMMIT DELETE ROWS.
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} ({columns})")
            cursor.execute(f"DELETE FROM {table}")

    def staged_tracks_add(self, table: str, columns: Sequence[str], rows: Sequence) -> None:
        marks = ", ".join(["%s"] * len(columns))
        with connection.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)

    def event_tallies_compact(self) -> int:
        last = EventDayTally.objects.order_by("-id").values_list("id", flat=True).first()
        if last is None:
            return 0
        with connection.cursor() as cursor:
            cursor.execute(_PORTABLE_FOLD_TALLIES, [last, last])
            added = cursor.rowcount
            cursor.execute(_PORTABLE_DROP_FOLDED, [last, last])
            return cursor.rowcount - added

    def partitions_maintain(
        self, *, today: date, days_ahead: int, retention_days: int
    ) -> dict[str, int]:
        # No partitions here: old raw events are deleted.
        cutoff = today - timedelta(days=retention_days)
        midnight = datetime(cutoff.year, cutoff.month, cutoff.day, tzinfo=UTC)
        deleted = Event.objects.filter(timestamp__lt=midnight).delete()[0]
        return {"created": 0, "dropped": 0, "deleted": deleted}

    def segment_members_update(
        self, statements: SegmentStatements, *, skip_added_meanwhile: bool = False
    ) -> tuple[int, int]:
        # One writer at a time (no member is added meanwhile): the log entries first, then the
        # members, in one transaction.
        s, names = statements, statements.names
        with connection.cursor() as cursor:
            cursor.execute(
                _PORTABLE_LOG_LEAVES.format(gone=s.gone, **names),
                [s.segment_id, s.at, *s.leave_params],
            )
            cursor.execute(_PORTABLE_LEAVE.format(gone=s.gone, **names), s.leave_params)
            left = cursor.rowcount
            cursor.execute(
                _PORTABLE_LOG_JOINS.format(new=s.new, **names), [s.segment_id, s.at, *s.join_params]
            )
            cursor.execute(
                _PORTABLE_JOIN.format(new=s.new, **names), [s.segment_id, s.at, *s.join_params]
            )
            return cursor.rowcount, left

    def temp_table_create(self, cursor, name: str, columns: str) -> None:
        cursor.execute(f"CREATE TEMPORARY TABLE {name} ({columns})")

    def planner_method(self, cursor, setting: str, allowed: bool) -> AbstractContextManager[None]:
        return nullcontext()  # SQLite's planner has no such choice

    def subjects_aggregate(self, run, target, ids) -> None:
        portable_scoring.subjects_aggregate(run, target, ids)

    def raw_percentiles(self, run, table, raw, previous_raw, where) -> tuple[float, float]:
        return portable_scoring.raw_percentiles(run, table, raw, previous_raw, where)

    def history_day_percentiles(self, builder) -> None:
        portable_scoring.history_day_percentiles(builder)

    def history_changes_sum(self, builder, changes, kinds, extra) -> None:
        portable_scoring.history_changes_sum(builder, changes, kinds, extra)

    def history_stretches_spread(self, builder, kind, stretches) -> None:
        portable_scoring.history_stretches_spread(builder, kind, stretches)
