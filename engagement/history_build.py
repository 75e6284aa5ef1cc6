"""Computes a workspace's score history for a range of past days from the daily rollups.

The score of day D is the scoring formula (engagement/scoring/formula.py) with D as "today": a
user's raw score is the sum of weight x capped count over the `lookback` days ending at D, the
score is that raw normalised by day D's p90 of the workspace's non-zero raw scores, and an account
scores the mean of its linked users' scores (users without a point counting 0), its raw score
being the weighted events attributed to it. The rounding and the score expression are the
scoring engine's own (`Dialect`), the percentile `percentile_90` on SQLite and, on PostgreSQL,
percentile_cont's interpolation read off a histogram; the history tests check every stored day
against a full rescore run as of that day.

Computing D after D one window at a time would read the rollups once per day. Instead each
(user, day) total enters the raw score on its day and leaves it `lookback` days later, so the raw
score changes only on those days: one ordered pass over each user's day totals gives the raw
score from each change to the next, and each such stretch becomes one row per day it covers
(engagement/history_stretches.py). A month of history for a million users is then one pass
over a month and a lookback of rollups. Up to a week (the daily step, a recompute after late
events) needs no ordering of every day total: each rollup row gives its subjects a change on its
first day and on the day it leaves the window, and a subject's changes summed in day order are
its raw scores, users and accounts from the same pass over the rollups. Days that already hold
points (a recompute after late events) are compared with the new ones, and only the points that
differ are written. Both are in engagement/history_recompute.py. On PostgreSQL, when the build
is its caller's outermost transaction, the accounts are worked out on a second connection
beside the users (engagement/scoring/alongside.py): over more than a week their points whole,
over up to a week their own raw points, their means (which need the users' days) then following
in the build's session.
"""

# SQL here is assembled from fixed table and column names and dialect snippets; every value is
# a query parameter.
# ruff: noqa: S608

from __future__ import annotations

import datetime

from django.conf import settings
from django.db import connection

from engagement.backends import database_backend
from engagement.history_recompute import (
    KINDS,
    day_table_columns,
    raw_by_changes,
    store_differences,
)
from engagement.history_stretches import raw_by_day
from engagement.models import Workspace
from engagement.scoring.alongside import alongside_start, rows_copied
from engagement.scoring.run import WorkspaceRun

# Ranges of up to this many days sum each subject's daily changes (raw_by_changes); longer
# ones take the one ordered pass over each subject's day totals (raw_by_day).
DELTA_DAYS = 7
# The account points computed on another connection (scoring.alongside), copied back.
_ACCOUNT_ROWS = "eds_h_account_row"
_ACCOUNT_ROW_COLUMNS = "account_id BIGINT, day DATE, score DOUBLE PRECISION, raw BIGINT"


class HistoryBuilder(WorkspaceRun):
    """Writes the stored points of days first..last (past days, inclusive) of one workspace,
    inside the caller's transaction. Days up to `stored_until` may hold points already (a
    recompute after late events): only the points that differ are written, and those no longer
    scoring deleted. Later days hold none (the caller deleted them, or they are new)."""

    def __init__(
        self,
        *,
        workspace: Workspace,
        first: datetime.date,
        last: datetime.date,
        stored_until: datetime.date | None = None,
        own_transaction: bool = False,
    ) -> None:
        super().__init__(
            workspace,
            {
                "ws": workspace.id,
                "product": workspace.product_id,
                "first": connection.ops.adapt_datefield_value(first),
                "last": connection.ops.adapt_datefield_value(last),
                "rollup_start": connection.ops.adapt_datefield_value(
                    first - datetime.timedelta(days=int(workspace.lookback_days) - 1)
                ),
            },
            local_settings=(f"work_mem = '{int(settings.SCORING_WORK_MEM_MB)}MB'", "jit = off"),
            own_transaction=own_transaction,
        )
        self.first, self.last = first, last
        self.stored_until = stored_until
        self.replacing = stored_until is not None and stored_until >= first
        self.lookback = int(workspace.lookback_days)

    @property
    def single_day(self) -> bool:
        """Whether the range is one day (the daily step): each subject then has one change, its
        whole window, and each user at most one point, which shorter statements use."""
        return self.first == self.last

    def build(self) -> tuple[int, int]:
        """Compute and store the days; returns the user and account points written (or, for
        stored days, changed)."""
        # It reads every rollup of its days and of a lookback before them, out of their order.
        database_backend().rollups_prefetch(self.workspace.product_id)
        self.prepare()
        short = self.short_range
        compute = self._account_days_alongside if short else self._account_rows_alongside
        accounts = alongside_start(self, compute)
        try:
            if accounts is None:
                self.raw_scores(with_accounts=True)
                return self.store_users(), self.store_accounts()
            self.raw_scores(with_accounts=False)
            users = self.store_users()
            if short:
                self.temp("eds_h_account_day", day_table_columns("account"))
                accounts.collect(self, "eds_h_account_day")
                return users, self.store_accounts()
            self.temp(_ACCOUNT_ROWS, _ACCOUNT_ROW_COLUMNS)
            accounts.collect(self, _ACCOUNT_ROWS)
            return users, self.store_account_rows(f"SELECT * FROM {_ACCOUNT_ROWS}")
        finally:
            if accounts is not None:
                accounts.close()

    @property
    def short_range(self) -> bool:
        """Whether the range is short enough to sum each subject's daily changes
        (raw_by_changes) rather than order every day total (raw_by_day)."""
        return (self.last - self.first).days < DELTA_DAYS

    def _account_days_alongside(self) -> bytes:
        """On another connection, for a short range: the accounts' own raw points of these days
        (eds_h_account_day). Their means are worked out in the job's session, from the users'
        days it has by then: worked out here as well, with the users' days and p90 again, they
        kept this side 8-10 s longer than the job at a million users, the job waiting
        (docs/benchmarks.md, 2026-11-27 afternoon)."""
        side = self._side()
        try:
            side.prepare()
            raw_by_changes(side, ("account",))
            return rows_copied(side, "eds_h_account_day")
        finally:
            side.close()

    def _account_rows_alongside(self) -> bytes:
        """On another connection (scoring.alongside): the account points of these days, as
        rows of _ACCOUNT_ROWS. That side works out the users' days and the days' p90 again,
        which the accounts' means need, beside this session doing the same for the users."""
        side = self._side()
        try:
            side.prepare()
            side.raw_scores(with_accounts=True)
            side.day_percentiles()
            side.temp(_ACCOUNT_ROWS, _ACCOUNT_ROW_COLUMNS)
            side.run(f"INSERT INTO {_ACCOUNT_ROWS} {side.account_rows()}")
            return rows_copied(side, _ACCOUNT_ROWS)
        finally:
            side.close()

    def _side(self) -> HistoryBuilder:
        """A builder of the same days, for the other connection's thread."""
        return HistoryBuilder(
            workspace=self.workspace,
            first=self.first,
            last=self.last,
            stored_until=self.stored_until,
        )

    # --- setup ------------------------------------------------------------------------------

    def prepare(self) -> None:
        """What every build loads first: weights, the accounts and users in scope, the lineage
        and the days to compute."""
        self.load_weights()
        self.analyze("eds_t_weight")  # joined to a month of rollups: the planner needs its size
        if self.filtered:
            self.load_matching_accounts()
            self.load_scoped_users()
        self.load_lineage()
        self.load_days()

    def load_days(self) -> None:
        """The days to compute, as a table."""
        self.temp("eds_h_day", "day DATE PRIMARY KEY, n INTEGER NOT NULL")
        days = (self.last - self.first).days + 1
        self.cursor.executemany(
            "INSERT INTO eds_h_day (day, n) VALUES (%s, %s)",
            [
                (connection.ops.adapt_datefield_value(self.first + datetime.timedelta(days=n)), n)
                for n in range(days)
            ],
        )

    # --- the shared steps ---------------------------------------------------------------------

    def raw_scores(self, *, with_accounts: bool) -> None:
        """eds_h_user_day (and eds_h_account_day): the raw scores of the days, by the path
        their number takes."""
        if self.short_range:
            raw_by_changes(self, KINDS if with_accounts else ("user",))
            return
        raw_by_day(self, "user", f"({self.user_points()}) p")
        if with_accounts:
            self.accounts_by_day()

    def day_number(self, day: str) -> str:
        """`day` as its number of days after the first day computed (negative before it)."""
        return self.sql.days_between(day, "%(first)s")

    # --- longer ranges: each day's points, then their running sums --------------------------

    def user_points(self) -> str:
        """A SELECT of each user's weighted points of each day with any (its number n), grouped
        in user order: read by raw_by_day as it streams, never stored."""
        scope = "JOIN eds_t_scope_user s ON s.user_id = r.user_id" if self.filtered else ""
        # The cap applies per user, event and day, whichever accounts the events went to;
        # without one, the rollup rows need no grouping by event first.
        counted = (
            f"""
            SELECT r.user_id, r.day, r.event_name, {self.capped("SUM(r.count)")} AS counted
            FROM engagement_eventrollup r {scope}
            WHERE r.product_id = %(product)s AND r.day >= %(rollup_start)s AND r.day <= %(last)s
            GROUP BY r.user_id, r.event_name, r.day
            """
            if self.cap is not None
            else f"""
            SELECT r.user_id, r.day, r.event_name, r.count AS counted
            FROM engagement_eventrollup r {scope}
            WHERE r.product_id = %(product)s AND r.day >= %(rollup_start)s AND r.day <= %(last)s
            """
        )
        return f"""
            SELECT e.user_id, {self.day_number("e.day")} AS n,
                SUM(e.counted * COALESCE(w.weight, 1)) AS points
            FROM ({counted}) e
            LEFT JOIN eds_t_weight w ON w.event_name = e.event_name
            GROUP BY e.user_id, {self.day_number("e.day")}
            HAVING SUM(e.counted * COALESCE(w.weight, 1)) > 0
        """

    def accounts_by_day(self) -> None:
        """eds_h_account_day: each account's raw score of each day on which it is not zero."""
        self.account_points()
        raw_by_day(self, "account", "eds_h_account_points")

    def account_points(self) -> None:
        """eds_h_account_points: each account's weighted points of each day with any (its
        number n); in a hierarchy, its descendants' too."""
        account, lineage = self.account_rollups()
        in_scope = (
            f"JOIN eds_t_match_account s ON s.account_id = {account}" if self.filtered else ""
        )
        # The cap applies to each user's events of a day within the account (one rollup row).
        self.temp("eds_h_account_points", "account_id BIGINT, n INTEGER, points BIGINT")
        points = f"SUM({self.capped('r.count')} * COALESCE(w.weight, 1))"
        self.run(
            f"""
            INSERT INTO eds_h_account_points (account_id, n, points)
            SELECT {account}, {self.day_number("r.day")}, {points}
            FROM engagement_eventrollup r {lineage} {in_scope}
            LEFT JOIN eds_t_weight w ON w.event_name = r.event_name
            WHERE r.product_id = %(product)s AND r.account_id IS NOT NULL
            AND r.day >= %(rollup_start)s AND r.day <= %(last)s
            GROUP BY {account}, r.day
            HAVING {points} > 0
            """
        )
        self.analyze("eds_h_account_points")

    # --- storing the points -----------------------------------------------------------------

    def day_percentiles(self) -> None:
        """Each day's p90 of the non-zero raw scores in eds_h_user_day (it holds only those),
        into eds_h_p90: the normaliser of that day's scores, the same percentile as the live
        scoring's (`percentile_90`; on PostgreSQL read off each day's histogram of raw scores,
        DatabaseBackend.history_day_percentiles)."""
        self.temp("eds_h_p90", f"day DATE PRIMARY KEY, p90 {self.sql.float}")
        self.backend.history_day_percentiles(self)

    def store_users(self) -> int:
        self.day_percentiles()
        points = f"""
            SELECT u.user_id, u.day, {self.sql.score("u.raw", "p.p90")} AS score, u.raw
            FROM eds_h_user_day u JOIN eds_h_p90 p ON p.day = u.day
        """
        if self.replacing:
            return store_differences(self, "user", points)
        return self.run(
            f"""
            INSERT INTO engagement_userscoreday
                (user_id, workspace_id, day, engagement_score, raw_score)
            SELECT user_id, %(ws)s, day, score, raw FROM ({points}) n
            """
        )

    def store_accounts(self) -> int:
        return self.store_account_rows(self.account_rows())

    def account_rows(self) -> str:
        """A SELECT of each account's point of each day (account_id, day, score, raw), from the
        users' days (eds_h_user_day), the days' p90 (eds_h_p90) and the accounts' own days
        (eds_h_account_day)."""
        in_scope = (
            "JOIN eds_t_match_account s ON s.account_id = m.account_id" if self.filtered else ""
        )
        # Every linked user counts in an account's mean, with or without a point that day. The
        # product's memberships are those of its accounts: a hundred thousand accounts to hash,
        # not a million users (0.7 s against 1.3-1.6 s, docs/benchmarks.md, 2026-11-27).
        memberships = self.memberships()
        self.temp("eds_h_account_mean", f"account_id BIGINT, day DATE, mean {self.sql.float}")
        if self.single_day:
            self._one_day_means(memberships, in_scope)
        else:
            self._means(memberships, in_scope)
        score = self.sql.round_half_up("mean")
        # Days stored afresh get their points in the order of the primary key, as the users'
        # days are: each index page is then changed in one run. A month of a hundred thousand
        # accounts' points (2.3 million) took 14.7-15.8 s to store in the order the aggregate
        # left them, 5.8-6.4 s in this one (docs/benchmarks.md, 2026-11-26 late night); on
        # the second connection the sort is off the build's critical path. Stored days only
        # get the few points that differ, in no need of an order.
        order = "" if self.replacing else "ORDER BY account_id, day"
        return f"""
            SELECT account_id, day, MAX(score) AS score, MAX(raw) AS raw FROM (
                SELECT account_id, day, {score} AS score, 0 AS raw FROM eds_h_account_mean
                UNION ALL
                SELECT account_id, day, 0, raw FROM eds_h_account_day
            ) x
            GROUP BY account_id, day
            HAVING MAX(score) > 0 OR MAX(raw) > 0
            {order}
        """

    def _means(self, memberships: str, in_scope: str) -> None:
        """eds_h_account_mean over several days: each account's linked users counted once
        (eds_h_account_total), then their scores of each day summed over that total."""
        self.temp("eds_h_account_total", "account_id BIGINT PRIMARY KEY, total INTEGER")
        self.run(
            f"""
            INSERT INTO eds_h_account_total (account_id, total)
            SELECT m.account_id, COUNT(*) FROM {memberships} m {in_scope}
            JOIN engagement_account a ON a.id = m.account_id
            WHERE a.product_id = %(product)s
            GROUP BY m.account_id
            """
        )
        self.analyze("eds_h_account_total")
        self.run(
            f"""
            INSERT INTO eds_h_account_mean (account_id, day, mean)
            SELECT m.account_id, u.day,
                CAST(SUM({self.sql.score("u.raw", "p.p90")}) AS {self.sql.float}) / MAX(t.total)
            FROM eds_h_user_day u
            JOIN eds_h_p90 p ON p.day = u.day
            JOIN {memberships} m ON m.user_id = u.user_id
            JOIN eds_h_account_total t ON t.account_id = m.account_id
            GROUP BY m.account_id, u.day
            """
        )

    def _one_day_means(self, memberships: str, in_scope: str) -> None:
        """eds_h_account_mean of a single day (the daily step): each linked user has at most
        one point, so one pass over the memberships, each joined to its user's point if any,
        gives both an account's total and its users' sum, with no table of totals to build
        and join first."""
        self.run(
            f"""
            INSERT INTO eds_h_account_mean (account_id, day, mean)
            SELECT m.account_id, %(first)s,
                CAST(SUM({self.sql.score("u.raw", "p.p90")}) AS {self.sql.float}) / COUNT(*)
            FROM {memberships} m {in_scope}
            JOIN engagement_account a ON a.id = m.account_id
            LEFT JOIN eds_h_user_day u ON u.user_id = m.user_id
            LEFT JOIN eds_h_p90 p ON p.day = u.day
            WHERE a.product_id = %(product)s
            GROUP BY m.account_id
            HAVING COUNT(u.user_id) > 0
            """
        )

    def store_account_rows(self, points: str) -> int:
        """Store the account points `points` selects (account_id, day, score, raw)."""
        if self.replacing:
            return store_differences(self, "account", points)
        return self.run(
            f"""
            INSERT INTO engagement_accountscoreday
                (account_id, workspace_id, day, engagement_score, raw_score)
            SELECT account_id, %(ws)s, day, score, raw FROM ({points}) n
            """
        )
