"""Work on a second database connection beside the job's own (PostgreSQL): a full rescore's
users, shared between the two, then its account figures; the account points of a history build.

PostgreSQL runs one statement on one core. A full rescore's users are cut into ranges of ids that
both connections take until none is left, the job's from the lowest and the other's from the
highest, so the users' aggregation, the longest statement of a rescore, runs on both cores. The
account figures read the rollups again without needing what the users' part computes (a history
build's accounts need the day's p90, which the second connection works out for itself): on the
other connection, while the job writes the users (or, in a history build, works out their
points), they leave the job's critical path (docs/scoring.md). The second connection imports a
snapshot the job exports as its users' part starts, so it reads every row committed before then
(a refresh's watermark, taken earlier, stays behind it), and its result comes back into a
temporary table of the job's session by COPY, through this process; the job alone writes.

Only when the job's transaction is its caller's outermost: another connection sees only committed
rows, and a caller's own transaction may hold rows it has not committed (a test's, or a
request's). Otherwise, and on SQLite, the job does all of it in its own session.
"""

# SQL names fixed temporary tables only.
# ruff: noqa: S608

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from queue import SimpleQueue

from django.conf import settings
from django.db import connection, transaction

from engagement.scoring.aggregation import (
    ACCOUNTS,
    USERS,
    UserIds,
    aggregate,
    result_table_create,
    user_id_bounds,
    users_aggregate_into,
)
from engagement.scoring.run import ScoringRun, StatementRunner, WorkspaceRun

# Ranges of user ids a full rescore's users are cut into: enough that the connection that
# finishes its share first waits at most about an eighth of the aggregation for the other, and
# few, because each range reads the rollup pages that hold its users. The drain stores rollups
# day by day, the users of a day in no order, so nearly every page holds some user of every
# range: 32 ranges read the window's pages 26 times over, 8 ranges 8 times, and a full
# rescore took 10 s longer with 32 than with 8 (docs/benchmarks.md, 2026-11-26, late).
USER_RANGES = 8

# What pg_export_snapshot() returns ("00000003-0000001B-1"): checked before it is put in the
# SET statement, which takes no parameter.
_SNAPSHOT_ID = re.compile(r"[0-9A-F]+(-[0-9A-F]+)+")


class Alongside:
    """A table's rows being computed on another connection: collect() copies them into the
    job's session, close() waits for that connection to be done either way."""

    def __init__(self, future: Future[bytes], executor: ThreadPoolExecutor) -> None:
        self._future = future
        self._executor = executor

    def collect(self, runner: StatementRunner, table: str) -> None:
        """Copy the rows into `table`, created (empty) in the job's session by the caller;
        re-raises the other connection's error."""
        rows_copy_in(runner, table, self._future.result())
        runner.analyze(table)

    def close(self) -> None:
        """Wait for the other connection (its error, if the job failed first, is the job's to
        report, not this one's)."""
        self._executor.shutdown(wait=True)

    def on_failure(self, callback: Callable[[BaseException], None]) -> None:
        """Call `callback` with the other connection's error, should it fail."""

        def failed(future: Future[bytes]) -> None:
            error = None if future.cancelled() else future.exception()
            if error is not None:
                callback(error)

        self._future.add_done_callback(failed)


def alongside_possible(job: WorkspaceRun) -> bool:
    """Whether `job` may have work done on another connection (see the module's docstring)."""
    return bool(
        settings.SCORING_ACCOUNTS_ALONGSIDE and job.backend.runs_alongside and job.own_transaction
    )


def alongside_start(job: WorkspaceRun, compute: Callable[[], bytes]) -> Alongside | None:
    """Run `compute` on another connection, inside `job`'s snapshot; None when the job must do
    that work in its own session (see the module's docstring). `compute` builds its own runner
    on that connection and returns rows_copied() of the table it filled."""
    return _started(job, compute) if alongside_possible(job) else None


def _started(job: WorkspaceRun, compute: Callable[[], bytes]) -> Alongside:
    snapshot = str(job.scalar("SELECT pg_export_snapshot()"))
    if not _SNAPSHOT_ID.fullmatch(snapshot):
        raise ValueError(f"unexpected snapshot id {snapshot!r}")
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scoring-alongside")
    return Alongside(executor.submit(_in_snapshot, snapshot, compute), executor)


def rows_copied(runner: StatementRunner, table: str, where: str = "") -> bytes:
    """`table`'s rows (those matching `where`, a condition with its WHERE) as COPY text, to be
    copied into the same table of the job's session (rows_copy_in)."""
    source = f"(SELECT * FROM {table} {where})" if where else table
    with runner.cursor.cursor.copy(f"COPY {source} TO STDOUT") as copy:
        return b"".join(copy)


def rows_copy_in(runner: StatementRunner, table: str, rows: bytes) -> None:
    """Add `rows` (from rows_copied of the same table) to `table`."""
    with runner.cursor.cursor.copy(f"COPY {table} FROM STDIN") as copy:
        copy.write(rows)


def _in_snapshot(snapshot: str, compute: Callable[[], bytes]) -> bytes:
    """`compute` in a transaction of this thread's own connection reading `snapshot`; the
    connection is closed after."""
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cursor.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
            return compute()
    finally:
        connection.close()


class UserRanges:
    """A full rescore's user ids cut into ranges, taken from the lowest by the job and from the
    highest by the other connection, each range once."""

    def __init__(self, bounds: UserIds | None, parts: int = USER_RANGES) -> None:
        self._ranges: deque[UserIds] = deque()
        if bounds is not None:
            first, end = bounds
            step = max(1, -(-(end - first) // parts))
            self._ranges.extend((low, min(low + step, end)) for low in range(first, end, step))
        self._lock = threading.Lock()

    def lowest(self) -> UserIds | None:
        with self._lock:
            return self._ranges.popleft() if self._ranges else None

    def highest(self) -> UserIds | None:
        with self._lock:
            return self._ranges.pop() if self._ranges else None


class RescoreAlongside:
    """A full rescore's other connection: its share of the users, then the accounts."""

    def __init__(self, run: ScoringRun) -> None:
        self._run = run
        self._ranges = UserRanges(user_id_bounds(run))
        # The other connection's user ranges as it hands them over (COPY text), then None; or
        # its error.
        self._users: SimpleQueue[bytes | BaseException | None] = SimpleQueue()
        self._accounts = _started(run, self._compute)
        self._accounts.on_failure(self._users_failed)

    def users_aggregate(self, run: ScoringRun) -> None:
        """eds_t_user as aggregate(run, USERS) fills it: the job's ranges, aggregated here,
        and the other connection's, each copied in as it is handed over: those done while the
        job was busy with its own at once, the last one while it comes."""
        result_table_create(run, USERS)
        while (ids := self._ranges.lowest()) is not None:
            users_aggregate_into(run, ids)
        while (rows := self._users.get()) is not None:
            if isinstance(rows, BaseException):
                raise rows
            rows_copy_in(run, USERS.table, rows)
        run.analyze(USERS.table)

    def accounts_collect(self, run: ScoringRun) -> None:
        """eds_t_account as aggregate(run, ACCOUNTS) fills it."""
        result_table_create(run, ACCOUNTS)
        self._accounts.collect(run, ACCOUNTS.table)

    def close(self) -> None:
        """Wait for the other connection (see Alongside.close)."""
        self._accounts.close()

    def _compute(self) -> bytes:
        """On the other connection: the users' ranges from the highest until none is left
        (their rows handed over as soon as they are done), then the accounts' rows."""
        run = self._run
        side = ScoringRun(
            workspace=run.workspace, state=run.state, now=run.now, today=run.window.end
        )
        try:
            side.full_rescore_start()
            result_table_create(side, USERS)
            # Each range's rows handed over as soon as it is done, while the job is still busy
            # with its own: at the end, only the last range's are left to wait for.
            while (ids := self._ranges.highest()) is not None:
                users_aggregate_into(side, ids)
                within = f"WHERE {USERS.key} >= {int(ids[0])} AND {USERS.key} < {int(ids[1])}"
                self._users.put(rows_copied(side, USERS.table, within))
            self._users.put(None)
            aggregate(side, ACCOUNTS)
            return rows_copied(side, ACCOUNTS.table)
        finally:
            side.close()

    def _users_failed(self, error: BaseException) -> None:
        # The job may be waiting for the users: it gets the other connection's error instead
        # (after the users' part, nothing reads it).
        self._users.put(error)


def rescore_alongside_start(run: ScoringRun) -> RescoreAlongside | None:
    """A full rescore's other connection, started (or None: the job does all of it)."""
    return RescoreAlongside(run) if alongside_possible(run) else None
