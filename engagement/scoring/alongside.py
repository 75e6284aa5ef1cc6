"""A full rescore's account figures, aggregated on a second database connection while the first
scores the users (PostgreSQL).

The accounts' per-event figures (aggregation.aggregate with ACCOUNTS) read the rollups again and
need nothing the users' part computes, and PostgreSQL runs one statement on one core: beside the
users' aggregation and write, on the machine's other core, they leave the rescore's critical path
(docs/scoring.md). The second connection imports the refresh's snapshot, so users and accounts
are scored from the same rollups, and its rows come back into the refresh's eds_t_account by
COPY, through this process.

Only when the refresh's transaction is its caller's outermost one: another connection sees only
committed rows, and a caller's own transaction may hold rows it has not committed (a test's, or
a request's). Otherwise, and on SQLite, the accounts are aggregated in the refresh's session.
"""

from __future__ import annotations

import re
from concurrent.futures import Future, ThreadPoolExecutor

from django.conf import settings
from django.db import connection, transaction

from engagement.scoring.aggregation import ACCOUNTS, aggregate, result_table_create
from engagement.scoring.run import ScoringRun

# What pg_export_snapshot() returns ("00000003-0000001B-1"): checked before it is put in the
# SET statement, which takes no parameter.
_SNAPSHOT_ID = re.compile(r"[0-9A-F]+(-[0-9A-F]+)+")


class AccountsAlongside:
    """The accounts' figures being computed on another connection; collect() loads them into
    the refresh's eds_t_account, close() waits for that connection to be done either way."""

    def __init__(self, future: Future[bytes], executor: ThreadPoolExecutor) -> None:
        self._future = future
        self._executor = executor

    def collect(self, run: ScoringRun) -> None:
        """eds_t_account, as aggregate(run, ACCOUNTS) fills it (re-raises the other side's
        error)."""
        rows = self._future.result()
        result_table_create(run, ACCOUNTS)
        with run.cursor.cursor.copy(f"COPY {ACCOUNTS.table} FROM STDIN") as copy:  # noqa: S608
            copy.write(rows)
        run.analyze(ACCOUNTS.table)

    def close(self) -> None:
        """Wait for the other connection (its error, if the refresh failed first, is the
        refresh's to report, not this one's)."""
        self._executor.shutdown(wait=True)


def accounts_alongside_start(run: ScoringRun) -> AccountsAlongside | None:
    """Start aggregating the accounts of a full rescore on another connection, or None when
    they must be aggregated in the refresh's own session (see the module's docstring)."""
    if not (settings.SCORING_ACCOUNTS_ALONGSIDE and run.sql.postgres and run.own_transaction):
        return None
    snapshot = str(run.scalar("SELECT pg_export_snapshot()"))
    if not _SNAPSHOT_ID.fullmatch(snapshot):
        raise ValueError(f"unexpected snapshot id {snapshot!r}")
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scoring-accounts")
    future = executor.submit(_accounts_copied, run, snapshot)
    return AccountsAlongside(future, executor)


def _accounts_copied(run: ScoringRun, snapshot: str) -> bytes:
    """On this thread's own connection, in the refresh's snapshot: the accounts' figures of
    `run`'s workspace as COPY text rows of eds_t_account."""
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cursor.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
            side = ScoringRun(
                workspace=run.workspace, state=run.state, now=run.now, today=run.window.end
            )
            try:
                side.full_rescore_start()
                aggregate(side, ACCOUNTS)
                with side.cursor.cursor.copy(
                    f"COPY {ACCOUNTS.table} TO STDOUT"  # noqa: S608
                ) as copy:
                    return b"".join(copy)
            finally:
                side.close()
    finally:
        connection.close()
