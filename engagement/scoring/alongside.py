"""Accounts aggregated on a second database connection while the first works on the users
(PostgreSQL): a full rescore's account figures, and the account points of a history build.

PostgreSQL runs one statement on one core, and both jobs' account figures read the rollups again
without needing what the users' part computes (a history build's accounts need the day's p90,
which the second connection works out for itself). Beside the users' part, on the machine's other
core, they leave the job's critical path (docs/scoring.md). The second connection imports a
snapshot the job exports as its users' part starts, so it reads every row committed before then
(a refresh's watermark, taken earlier, stays behind it), and its result comes back into a
temporary table of the job's session by COPY, through this process; the job alone writes.

Only when the job's transaction is its caller's outermost: another connection sees only committed
rows, and a caller's own transaction may hold rows it has not committed (a test's, or a
request's). Otherwise, and on SQLite, the accounts are computed in the job's session.
"""

# SQL names fixed temporary tables only.
# ruff: noqa: S608

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from django.conf import settings
from django.db import connection, transaction

from engagement.scoring.aggregation import ACCOUNTS, aggregate, result_table_create
from engagement.scoring.run import ScoringRun, StatementRunner, WorkspaceRun

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
        rows = self._future.result()
        with runner.cursor.cursor.copy(f"COPY {table} FROM STDIN") as copy:
            copy.write(rows)
        runner.analyze(table)

    def close(self) -> None:
        """Wait for the other connection (its error, if the job failed first, is the job's to
        report, not this one's)."""
        self._executor.shutdown(wait=True)


def alongside_start(job: WorkspaceRun, compute: Callable[[], bytes]) -> Alongside | None:
    """Run `compute` on another connection, inside `job`'s snapshot; None when the job must do
    that work in its own session (see the module's docstring). `compute` builds its own runner
    on that connection and returns rows_copied() of the table it filled."""
    if not (settings.SCORING_ACCOUNTS_ALONGSIDE and job.sql.postgres and job.own_transaction):
        return None
    snapshot = str(job.scalar("SELECT pg_export_snapshot()"))
    if not _SNAPSHOT_ID.fullmatch(snapshot):
        raise ValueError(f"unexpected snapshot id {snapshot!r}")
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="accounts-alongside")
    return Alongside(executor.submit(_in_snapshot, snapshot, compute), executor)


def rows_copied(runner: StatementRunner, table: str) -> bytes:
    """`table`'s rows as COPY text, to be collected into the same table of the job's session."""
    with runner.cursor.cursor.copy(f"COPY {table} TO STDOUT") as copy:
        return b"".join(copy)


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


def accounts_alongside_start(run: ScoringRun) -> Alongside | None:
    """A full rescore's eds_t_account, aggregated on another connection (or None)."""
    return alongside_start(run, lambda: _accounts_aggregated(run))


def accounts_collect(run: ScoringRun, accounts: Alongside) -> None:
    """eds_t_account as aggregate(run, ACCOUNTS) fills it, from `accounts`."""
    result_table_create(run, ACCOUNTS)
    accounts.collect(run, ACCOUNTS.table)


def _accounts_aggregated(run: ScoringRun) -> bytes:
    side = ScoringRun(workspace=run.workspace, state=run.state, now=run.now, today=run.window.end)
    try:
        side.full_rescore_start()
        aggregate(side, ACCOUNTS)
        return rows_copied(side, ACCOUNTS.table)
    finally:
        side.close()
