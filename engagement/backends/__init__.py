"""One database backend, chosen once: every statement that PostgreSQL and SQLite need written
differently sits behind `DatabaseBackend`, with a PostgreSQL implementation (postgresql.py,
pg_events.py: COPY, unnest arrays, data-modifying WITH, partitions; pg_scoring.py: the scoring
engine's and the history build's own statements) and a portable one (portable.py,
portable_scoring.py: what SQLite, the embedded mode, runs). No other module of engagement reads
the database vendor or chooses a statement by it (the scoring dialect spells expressions only);
ingestion has its own backend for its tables (ingestion/backends.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from datetime import date, datetime
from typing import TYPE_CHECKING

from django.db import connection, models

if TYPE_CHECKING:
    from engagement.event_store import StagedTrackIds, StoredEvents
    from engagement.history_build import HistoryBuilder
    from engagement.scoring.aggregation import Target, UserIds
    from engagement.scoring.dialect import Dialect
    from engagement.scoring.run import ScoringRun, StatementRunner


class DatabaseBackend:
    """The vendor-specific operations of engagement. Each method's docstring is the contract;
    the implementations answer alike on the same data (tests run on both databases)."""

    vendor = ""
    # Whether oldest_write_started can tell (engagement.scoring.changes.watermark_at).
    sees_open_writes = False
    # Rows per set-based statement (engagement.bulk).
    bulk_rows = 500

    @property
    def dialect(self) -> Dialect:
        """The scoring engine's SQL expressions for this database."""
        raise NotImplementedError

    def oldest_write_started(self) -> datetime | None:
        """When the oldest transaction of another session that has written to this database and
        not yet ended began (the rows it writes are stamped after that); None when there is
        none or the database cannot tell."""
        return None

    def bulk_source(self, fields: list[models.Field], rows: Sequence[Sequence]) -> tuple[str, list]:
        """The rows as a subquery with columns c0, c1, ... and its parameters."""
        raise NotImplementedError

    def select_in(
        self,
        model: type[models.Model],
        columns: Sequence[str],
        *,
        product_id: int,
        tracking_ids: Collection[str],
        lock: bool,
    ) -> list[tuple]:
        """Rows of one product by tracking id, in id order, locked FOR UPDATE when `lock`."""
        raise NotImplementedError

    def events_store(
        self, product_id: int, staged: StagedTrackIds
    ) -> tuple[StoredEvents, set[str]]:
        """Store the staged tracks' events (event_store.staged_events_select), their rollups,
        tallies, activity, backfill notes and first/last seen; returns what was stored and the
        event names (see event_store.events_store)."""
        raise NotImplementedError

    def staged_tracks_start(self, table: str, columns: str) -> None:
        """An empty session table for this transaction's staged tracks (track_staging)."""
        raise NotImplementedError

    def staged_tracks_add(self, table: str, columns: Sequence[str], rows: Sequence) -> None:
        """Rows (track_staging.TrackRow) into the staged tracks' table."""
        raise NotImplementedError

    def event_tallies_compact(self) -> int:
        """Fold the tally rows of each (product, day, name) into one; returns rows removed."""
        raise NotImplementedError

    def partitions_maintain(
        self, *, today: date, days_ahead: int, retention_days: int
    ) -> dict[str, int]:
        """Daily event partitions ahead, old ones dropped, older rows deleted."""
        raise NotImplementedError

    def segment_members_update(
        self, statements: SegmentStatements, *, skip_added_meanwhile: bool = False
    ) -> tuple[int, int]:
        """Apply a segment's leaves and joins and log each; returns (joined, left). A member a
        concurrent refresh of the segment added first may fail the joins with an IntegrityError;
        with `skip_added_meanwhile` such members are skipped instead."""
        raise NotImplementedError

    def score_tables_analyze(self) -> None:
        """Refresh the planner's statistics of the score tables and the segments' members
        (outside a transaction)."""

    def rollups_prefetch(self, product_id: int) -> bool:
        """Ask for the daily rollups and the indexes a job reads them by to be read into the
        operating system's cache at once, ahead of a job that reads all of the product's out of
        their stored order (a full rescore, a history build); returns whether it was asked.
        Where the database cannot, they would not fit its cache, or the product's rollups are
        too few to reach most of their pages, nothing is done."""
        return False

    def rollups_order(self, product_id: int, day: date) -> int | None:
        """Store the product's rollups of `day`, a day that has ended, again by account, then
        user, so that a refresh reading an account's rollups, or a job reading a range of
        users, finds them on few pages; returns the rows moved, or None when writers held the
        rollups too long (the day is left to a later try). Rows keep every value, their id
        included. Where the database keeps rows in the order they
        came anyway and its jobs read few (SQLite, the embedded mode), nothing is done."""
        return 0

    # The steps of the scoring engine (engagement/scoring) and the history build
    # (engagement/history_*) that each database runs its own way: the algorithm is theirs, the
    # statements here (pg_scoring.py, portable_scoring.py). `cursor`: the job's
    # (scoring.run.StatementRunner).

    # Whether a job may share its work with a second connection that imports its snapshot and
    # hands rows back by COPY (scoring.alongside).
    runs_alongside = False
    # Whether a statement can be told to give up waiting for a lock (`SET LOCAL lock_timeout`):
    # `manage.py migrate` bounds each schema statement's wait with it (config's migrate).
    locks_time_out = False

    def job_settings(self, cursor, settings: Sequence[str]) -> None:
        """Apply a job's planner settings ("work_mem = '64MB'", ...) for its transaction; where
        the database has none, nothing."""

    def temp_table_create(self, cursor, name: str, columns: str) -> None:
        """A job's temporary table (the job drops it: StatementRunner.close)."""
        raise NotImplementedError

    def planner_method(self, cursor, setting: str, allowed: bool) -> AbstractContextManager[None]:
        """Within the block, the planner may use the method `setting` ("enable_hashagg") or not,
        as `allowed`; after it, as before. Where the planner has no such choice, nothing."""
        raise NotImplementedError

    def temp_tables_analyze(self, cursor, names: Sequence[str]) -> None:
        """Give the planner the statistics of a job's fresh temporary tables, where it keeps any."""

    def subjects_aggregate(self, run: ScoringRun, target: Target, ids: UserIds | None) -> None:
        """Fill the target's result table (scoring.aggregation.result_table_create) for every
        user or account in the run's scope; `ids`: only the users in that range of ids, where
        the backend runs alongside (scoring.alongside)."""
        raise NotImplementedError

    def raw_percentiles(
        self, run: StatementRunner, table: str, raw: str, previous_raw: str, where: str
    ) -> tuple[float, float]:
        """formula.percentile_90 of the non-zero values of the columns `raw` and
        `previous_raw` of `table`'s rows matching `where`, in one pass."""
        raise NotImplementedError

    def history_day_percentiles(self, builder: StatementRunner) -> None:
        """eds_h_p90 (created by the caller): formula.percentile_90 of each day's raw scores in
        eds_h_user_day (which holds only the non-zero ones)."""
        raise NotImplementedError

    def history_changes_sum(
        self, builder: HistoryBuilder, changes: str, kinds: tuple[str, ...], extra: dict
    ) -> None:
        """eds_h_<kind>_change (created by the caller) of each of `kinds` from `changes`, a
        SELECT of (user_id, account_id, k, user_points, account_points): each subject's sum of
        points per day number k (history_recompute.changes_sum_each)."""
        raise NotImplementedError

    def history_stretches_spread(self, builder: HistoryBuilder, kind: str, stretches: str) -> None:
        """eds_h_<kind>_day (created by the caller) from `stretches`
        (history_stretches._stretches_sql): each stretch's raw score on each day of first..last
        it covers, where it is above 0."""
        raise NotImplementedError


class SegmentStatements:
    """The SQL pieces of one segment refresh (engagement.segments): the FROM clauses of the
    members that left (`gone`) and of the rows that joined (`new`), the table and column names,
    and the parameters, for the backend to assemble its statements. `whole`: every subject is
    compared (not the ids of a table, engagement.segments._AmongTables), so the statements
    compare two sets.

    `gone` and `new` each hold the segment's matching query (`leave_params` and `join_params`
    its parameters in place). `gone_from_matching` and `new_from_matching` are the same clauses
    reading its rows from a relation named `matching` instead, for a backend that works out
    `matching` (with `matching_params`) once for both; each takes the segment's id."""

    def __init__(
        self,
        *,
        names: dict[str, str],
        gone: str,
        new: str,
        segment_id: int,
        at: datetime | str | None,  # as the connection adapts a datetime
        leave_params: list,
        join_params: list,
        whole: bool,
        matching: str,
        matching_params: list,
        gone_from_matching: str,
        new_from_matching: str,
    ) -> None:
        self.names = names
        self.gone = gone
        self.new = new
        self.segment_id = segment_id
        self.at = at
        self.leave_params = leave_params
        self.join_params = join_params
        self.whole = whole
        self.matching = matching
        self.matching_params = matching_params
        self.gone_from_matching = gone_from_matching
        self.new_from_matching = new_from_matching


_chosen: dict[str, DatabaseBackend] = {}


def database_backend() -> DatabaseBackend:
    """The backend of the default connection's database: PostgreSQL, or portable (SQLite)."""
    vendor = connection.vendor
    if vendor not in _chosen:
        if vendor == "postgresql":
            from engagement.backends.postgresql import PostgresBackend

            _chosen[vendor] = PostgresBackend()
        else:
            from engagement.backends.portable import PortableBackend

            _chosen[vendor] = PortableBackend()
    return _chosen[vendor]
