"""The PostgreSQL backend: COPY, typed arrays through unnest(), data-modifying WITH, row locks in
one statement, daily partitions (engagement/backends/pg_events.py for the event store)."""

# SQL is assembled from fixed table names and model metadata; every value is a parameter.
# ruff: noqa: S608

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import date, datetime

from django.db import OperationalError, connection, models, transaction

from engagement.backends import DatabaseBackend, SegmentStatements, pg_events, pg_scoring
from engagement.event_store import StagedTrackIds, StoredEvents
from engagement.models import EventRollup
from engagement.scoring.dialect import Dialect


def _pg_source(fields: list[models.Field], rows: Sequence[Sequence]) -> tuple[str, list]:
    arrays: list[list] = [[] for _ in fields]
    json_columns = [index for index, f in enumerate(fields) if isinstance(f, models.JSONField)]
    for row in rows:
        for index, value in enumerate(row):
            arrays[index].append(value)
    for index in json_columns:  # JSON travels as text and is cast in SQL
        arrays[index] = [None if v is None else json.dumps(v) for v in arrays[index]]
    casts = ", ".join(
        "%s::text[]::jsonb[]"
        if isinstance(f, models.JSONField)
        else f"%s::{f.db_type(connection)}[]"
        for f in fields
    )
    names = ", ".join(f"c{index}" for index in range(len(fields)))
    return f"(SELECT * FROM unnest({casts}) AS eds_u({names}))", arrays


_PG_LEAVE = """
    WITH gone AS (DELETE {gone} RETURNING m.account_id, m.user_id)
    INSERT INTO {changes} (segment_id, account_id, user_id, change, at)
    SELECT %s, account_id, user_id, 'left', %s FROM gone"""
_PG_JOIN = """
    WITH added AS (
        INSERT INTO {members} (segment_id, {column}, {other}, joined_at)
        SELECT %s, q.{column}, NULL, %s {new}
        {on_conflict} RETURNING {column})
    INSERT INTO {changes} (segment_id, {column}, {other}, change, at)
    SELECT %s, {column}, NULL, 'joined', %s FROM added"""
# Among a list of ids, both in one statement that works out the matching rows once: the two
# statements above each ran the segment's query over the list, most of either one's time (the
# 11 built-in segments: 0.54-0.97 s against 0.40-0.73 s after one track from each of 2,500-4,800
# users at a million, docs/benchmarks.md). Every part of one statement sees the same rows, and
# the members that leave (not matching) and those that join (matching) are never the same.
_PG_REFRESH_AMONG = """
    WITH matching AS MATERIALIZED ({matching}),
    gone AS (DELETE {gone} RETURNING m.account_id, m.user_id),
    added AS (
        INSERT INTO {members} (segment_id, {column}, {other}, joined_at)
        SELECT %s, q.{column}, NULL, %s {new}
        {on_conflict} RETURNING {column}),
    left_logged AS (
        INSERT INTO {changes} (segment_id, account_id, user_id, change, at)
        SELECT %s, account_id, user_id, 'left', %s FROM gone),
    joined_logged AS (
        INSERT INTO {changes} (segment_id, {column}, {other}, change, at)
        SELECT %s, {column}, NULL, 'joined', %s FROM added)
    SELECT (SELECT COUNT(*) FROM added), (SELECT COUNT(*) FROM gone)"""


class PostgresBackend(DatabaseBackend):
    vendor = "postgresql"
    sees_open_writes = True
    bulk_rows = 50_000  # arrays of any length: one statement, parsed once

    @property
    def dialect(self) -> Dialect:
        return Dialect("postgresql")

    def oldest_write_started(self) -> datetime | None:
        # backend_xid is set once a transaction writes; a read-only one (a pg_dump, a report)
        # never holds the watermark back.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT min(xact_start) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL"
            )
            row = cursor.fetchone()
        return row[0] if row else None

    def bulk_source(self, fields: list[models.Field], rows: Sequence[Sequence]) -> tuple[str, list]:
        return _pg_source(fields, rows)

    def select_in(self, model, columns, *, product_id, tracking_ids, lock) -> list[tuple]:
        # One array parameter: nothing to prepare per tracking id. JSON columns come back as
        # text, as the ORM reads them, and are decoded here with the json module (orjson would
        # turn an integer beyond 64 bits, which traits may hold, into a float).
        table = connection.ops.quote_name(model._meta.db_table)
        json_columns = {
            index
            for index, name in enumerate(columns)
            if isinstance(model._meta.get_field(name), models.JSONField)
        }
        select = ", ".join(
            f"{connection.ops.quote_name(model._meta.get_field(name).column)}"
            + ("::text" if index in json_columns else "")
            for index, name in enumerate(columns)
        )
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {select} FROM {table} WHERE product_id = %s "  # noqa: S608
                f"AND tracking_id = ANY(%s) ORDER BY id{' FOR UPDATE' if lock else ''}",
                [product_id, sorted(tracking_ids)],
            )
            rows = cursor.fetchall()
        if not json_columns:
            return [tuple(row) for row in rows]
        return [
            tuple(json.loads(v) if i in json_columns else v for i, v in enumerate(row))
            for row in rows
        ]

    def events_store(
        self, product_id: int, staged: StagedTrackIds
    ) -> tuple[StoredEvents, set[str]]:
        with connection.cursor() as cursor:
            return pg_events.events_store(cursor, product_id, staged)

    def staged_tracks_add(self, table: str, columns: Sequence[str], rows: Sequence) -> None:
        with connection.cursor() as cursor:
            pg_events.staged_tracks_add(cursor, table, columns, rows)

    def staged_tracks_start(self, table: str, columns: str) -> None:
        # This transaction's only (ON COMMIT DROP: nothing outlives it, so a transaction pooler
        # may hand the next one any server session); the TRUNCATE keeps each call's rows its own.
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} ({columns}) ON COMMIT DROP")
            cursor.execute(f"TRUNCATE {table}")

    def event_tallies_compact(self) -> int:
        with transaction.atomic(), connection.cursor() as cursor:
            return pg_events.event_tallies_compact(cursor)

    def partitions_maintain(
        self, *, today: date, days_ahead: int, retention_days: int
    ) -> dict[str, int]:
        with transaction.atomic(), connection.cursor() as cursor:
            return pg_events.partitions_maintain(
                cursor, today=today, days_ahead=days_ahead, retention_days=retention_days
            )

    def segment_members_update(
        self, statements: SegmentStatements, *, skip_added_meanwhile: bool = False
    ) -> tuple[int, int]:
        # Each change and its log entry are one statement (a data-modifying WITH), so a
        # concurrent refresh of the same segment cannot log a join or a leave that did not happen.
        # New members go in by a plain INSERT: `ON CONFLICT DO NOTHING` costs every row a
        # speculative insertion (a second look in the unique index, a second WAL record), a third
        # of the time a rescore spends filling a segment, and only a member another refresh added
        # meanwhile conflicts (the caller then runs again with skip_added_meanwhile).
        s, names = statements, statements.names
        on_conflict = "ON CONFLICT DO NOTHING" if skip_added_meanwhile else ""
        if not s.whole:
            return self._segment_members_update_among(s, on_conflict)
        with connection.cursor() as cursor, _sets_compared(cursor, whole=s.whole):
            cursor.execute(
                _PG_LEAVE.format(gone=s.gone, **names),
                [*s.leave_params, s.segment_id, s.at],
            )
            left = cursor.rowcount
            cursor.execute(
                _PG_JOIN.format(new=s.new, on_conflict=on_conflict, **names),
                [s.segment_id, s.at, *s.join_params, s.segment_id, s.at],
            )
            return cursor.rowcount, left

    @staticmethod
    def _segment_members_update_among(s: SegmentStatements, on_conflict: str) -> tuple[int, int]:
        statement = _PG_REFRESH_AMONG.format(
            matching=s.matching,
            gone=s.gone_from_matching,
            new=s.new_from_matching,
            on_conflict=on_conflict,
            **s.names,
        )
        params = [
            *s.matching_params,
            s.segment_id,  # gone
            *(s.segment_id, s.at, s.segment_id),  # added, then its NOT EXISTS
            *(s.segment_id, s.at),  # left_logged
            *(s.segment_id, s.at),  # joined_logged
        ]
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            joined, left = cursor.fetchone()
        return joined, left

    def score_tables_analyze(self) -> None:
        # The segments' members too: a full rescore compares every segment whole, and a
        # first fill left the planner expecting a couple of thousand members where there
        # were 100,000, so a refresh among a few ids read every member of the segment to
        # find the few that left (22-29 ms a segment against 2-10 ms, docs/benchmarks.md).
        if not connection.in_atomic_block:
            with connection.cursor() as cursor:
                cursor.execute(
                    "ANALYZE engagement_userscore, engagement_accountscore, "
                    "engagement_segmentmember"
                )

    def rollups_prefetch(self, product_id: int) -> bool:
        # Scoring reads the rollups by user (the unique key) and by account: one 8 kB page at a
        # time, each from disk when the operating system has let it go, which the first user
        # range of a rescore waited for (8-12 s instead of 3.5 s at a million users). Asked for
        # whole, the pages come in large sequential reads: 1.3 s for 2.4 GB from disk, 0.2 s
        # when already cached (docs/benchmarks.md, 2026-11-27 evening). pg_prewarm's prefetch
        # only advises the kernel. It needs the extension (a migration creates it where the
        # role may) and the right to call it. It is skipped when the relations exceed
        # effective_cache_size, the cache PostgreSQL itself plans with (years of rollups it
        # would only push other data out), and for a product with less than a fiftieth of the
        # rollups: the products' rows are stored side by side, day by day, about 50 to a page,
        # so a product with more reaches most pages anyway, and a smaller one reads only the
        # pages of its own rows, by index.
        with connection.cursor() as cursor:
            prewarm = _pg_prewarm_callable(cursor)
            if prewarm is None:
                return False
            table, relations = EventRollup._meta.db_table, [EventRollup._meta.db_table]
            relations += _rollup_indexes()
            cursor.execute(
                """
                SELECT SUM(pg_relation_size(to_regclass(r))) <= (
                    SELECT CAST(setting AS BIGINT) * 8192 FROM pg_settings
                    WHERE name = 'effective_cache_size')
                FROM unnest(CAST(%s AS text[])) r
                """,
                [relations],
            )
            if not cursor.fetchone()[0]:
                return False
            product_rows = _rows_estimated(cursor, table, "product_id = %s", [product_id])
            if product_rows < _PREFETCH_MIN_SHARE * _rows_estimated(cursor, table):
                return False
            cursor.execute(
                f"SELECT {prewarm}(to_regclass(r), 'prefetch') "
                "FROM unnest(CAST(%s AS text[])) r WHERE to_regclass(r) IS NOT NULL",
                [relations],
            )
            return True

    def rollups_order(self, product_id: int, day: date) -> int | None:
        # The drain stores a day's rollups as its batches come, in no order. Stored again by
        # account, and within an account by user, an account's rows of the day share a page or
        # two: an incremental refresh reads each changed account's rollups through the account
        # index, 2.3-2.8 times slower at one page per user and day (user order; docs/
        # benchmarks.md, "Ended days stored by account"). A user's rows stay side by side within
        # its account; a full rescore's ranges of users read every account's pages (scoring.md).
        # PostgreSQL moves a row only by deleting it and inserting it again, so each chunk of
        # rows is moved under a lock that waits for the rollups' writers and holds them off
        # (readers go on): a statement that deletes or copies rows by plain DML (an erasure, an
        # alias merge) would otherwise miss a row moved beside it. Chunks keep that wait short;
        # a writer holding the table longer than _ORDER_LOCK_TIMEOUT leaves the day to later.
        table = EventRollup._meta.db_table
        with connection.cursor() as cursor:
            # The day's rows, and the (account, user) that starts each chunk after the first:
            # a chunk holds whole users' rows within an account, read by rollup_day_account_idx.
            cursor.execute(
                f"""
                SELECT count(*), array_agg(DISTINCT ARRAY[account_key, user_id])
                    FILTER (WHERE n %% %s = 0)
                FROM (SELECT account_key, user_id,
                          row_number() OVER (ORDER BY account_key, user_id) AS n
                      FROM {table} WHERE product_id = %s AND day = %s) AS numbered
                """,
                [_ORDER_CHUNK_ROWS, product_id, day],
            )
            rows, starts = cursor.fetchone()
        if not rows:
            return 0
        firsts = sorted((account, user) for account, user in starts or [])
        bounds: list[_RollupKey | None] = [None, *firsts, None]
        moved = 0
        for low, high in zip(bounds, bounds[1:], strict=False):
            try:
                with transaction.atomic():
                    moved += _rollups_chunk_order(product_id, day, low, high)
            except OperationalError as error:
                if getattr(error.__cause__, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
                    return None
                raise
        return moved

    runs_alongside = True
    locks_time_out = True

    def job_settings(self, cursor, settings: Sequence[str]) -> None:
        pg_scoring.job_settings(cursor, settings)

    def temp_table_create(self, cursor, name: str, columns: str) -> None:
        pg_scoring.temp_table_create(cursor, name, columns)

    def planner_method(self, cursor, setting: str, allowed: bool) -> AbstractContextManager[None]:
        return pg_scoring.planner_method(cursor, setting, allowed)

    def temp_tables_analyze(self, cursor, names: Sequence[str]) -> None:
        pg_scoring.temp_tables_analyze(cursor, names)

    def subjects_aggregate(self, run, target, ids) -> None:
        pg_scoring.subjects_aggregate(run, target, ids)

    def raw_percentiles(self, run, table, raw, previous_raw, where) -> tuple[float, float]:
        return pg_scoring.raw_percentiles(run, table, raw, previous_raw, where)

    def history_day_percentiles(self, builder) -> None:
        pg_scoring.history_day_percentiles(builder)

    def history_changes_sum(self, builder, changes, kinds, extra) -> None:
        pg_scoring.history_changes_sum(builder, changes, kinds, extra)

    def history_stretches_spread(self, builder, kind, stretches) -> None:
        pg_scoring.history_stretches_spread(builder, kind, stretches)


# Where a day's rollups are stored once ordered: (account_key, user_id).
_RollupKey = tuple[int, int]


def _rollups_chunk_order(
    product_id: int, day: date, low: _RollupKey | None, high: _RollupKey | None
) -> int:
    """Move the rollups of `day` from (account, user) `low` (included) to `high` (excluded),
    None for no bound, to the end of the table in account, user and event order; the rows
    moved."""
    table = EventRollup._meta.db_table
    # A concrete field has a column.
    columns = ", ".join(f.column for f in EventRollup._meta.concrete_fields if f.column)
    within = ""
    params: list[int | date] = [product_id, day]
    if low is not None:
        within, params = within + " AND (account_key, user_id) >= (%s, %s)", [*params, *low]
    if high is not None:
        within, params = within + " AND (account_key, user_id) < (%s, %s)", [*params, *high]
    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{_ORDER_LOCK_TIMEOUT}'")
        cursor.execute(f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE")
        cursor.execute("SET LOCAL lock_timeout = DEFAULT")
        cursor.execute(
            f"""
            WITH moved AS (
                DELETE FROM {table} WHERE product_id = %s AND day = %s {within}
                RETURNING {columns})
            INSERT INTO {table} ({columns})
            SELECT {columns} FROM moved ORDER BY account_key, user_id, event_name
            """,
            params,
        )
        return cursor.rowcount


# Rollups moved per transaction by rollups_order (0.3 s each, 0.5 s at most, at a million users:
# a day 11 s in all; docs/benchmarks.md, 2026-11-27 night), and how long one waits for the
# rollups' writers before leaving the day to a later try.
_ORDER_CHUNK_ROWS = 10_000
_ORDER_LOCK_TIMEOUT = "2s"
_LOCK_NOT_AVAILABLE = "55P03"  # SQLSTATE lock_not_available


def _pg_prewarm_callable(cursor) -> str | None:
    """pg_prewarm's qualified name, when it is installed and this role may call it."""
    cursor.execute(
        """
        SELECT n.nspname FROM pg_extension e
        JOIN pg_namespace n ON n.oid = e.extnamespace
        JOIN pg_proc p ON p.pronamespace = n.oid AND p.proname = 'pg_prewarm'
        WHERE e.extname = 'pg_prewarm' AND has_function_privilege(p.oid, 'EXECUTE')
        """
    )
    row = cursor.fetchone()
    return None if row is None else f"{connection.ops.quote_name(row[0])}.pg_prewarm"


# The share of the rollups a product needs for a prefetch of all of them (rollups_prefetch).
_PREFETCH_MIN_SHARE = 1 / 50


def _rows_estimated(cursor, table: str, where: str = "TRUE", params: list | None = None) -> float:
    """The planner's estimate of `table`'s rows matching `where`, from its statistics: no scan."""
    cursor.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {table} WHERE {where}", params or [])
    return float(cursor.fetchone()[0][0]["Plan"]["Plan Rows"])


def _rollup_indexes() -> list[str]:
    """The indexes the rollups are read by: the unique key (by user) and the account's, not the
    primary key, which no job reads them by."""
    meta = EventRollup._meta
    unique = [c.name for c in meta.constraints if isinstance(c, models.UniqueConstraint)]
    return [*unique, *(index.name for index in meta.indexes)]


@contextmanager
def _sets_compared(cursor, *, whole: bool) -> Iterator[None]:
    """Within the block, a whole segment's refresh joins by hashing or merging, never by a loop
    over one side for each row of the other; after it, as before.

    Its members table may look empty to the planner (a new install, a first fill), which then
    picked a nested loop that scanned the table for each new member, while the same statement
    was inserting them: quadratic, 3.6 s for 25,000 accounts (docs/benchmarks.md). Comparing
    whole sets, hashing costs little even when they are small; a refresh among a few ids keeps
    its loop of index lookups."""
    if not whole:
        yield
        return
    cursor.execute("SHOW enable_nestloop")
    before = cursor.fetchone()[0]
    cursor.execute("SET LOCAL enable_nestloop = off")
    yield
    # Not on an error: the statement's (sub)transaction is rolled back, the setting with it.
    cursor.execute(f"SET LOCAL enable_nestloop = {'on' if before == 'on' else 'off'}")
