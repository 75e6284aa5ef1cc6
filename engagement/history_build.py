"""Computes a workspace's score history for a range of past days from the daily rollups.

The score of day D is the scoring formula (engagement/scoring/formula.py) with D as "today": a
user's raw score is the sum of weight x capped count over the `lookback` days ending at D, the
score is that raw normalised by day D's p90 of the workspace's non-zero raw scores, and an account
scores the mean of its linked users' scores (users without a point counting 0), its raw score
being the weighted events attributed to it. The rounding, the score expression and the
percentile are the scoring engine's own (`Dialect`, `percentile_90`); the history tests check
every stored day against a full rescore run as of that day.

Computing D after D one window at a time would read the rollups once per day. Instead each
(user, day) total enters the raw score on its day and leaves it `lookback` days later: one pass
turns the rollups into these changes, a running sum over each user's changes gives the raw score
from one change to the next, and each such stretch becomes one row per day it covers. A month of
history for a million users is then one pass over a month and a lookback of rollups. A day or two
(the daily step) sums each day's window straight from the rollups instead, users and accounts in
the same pass.
"""

# SQL here is assembled from fixed table and column names and dialect snippets; every value is
# a query parameter.
# ruff: noqa: S608

from __future__ import annotations

import datetime
from collections import defaultdict

from django.conf import settings
from django.db import connection

from engagement.models import Account, Workspace
from engagement.scoring import Dialect, percentile_90
from engagement.segments import accounts_admitted

# Ranges shorter than this many days sum each day's window straight from the rollups.
DIRECT_SUM_DAYS = 3


class HistoryBuilder:
    """Writes the stored points of days first..last (past days, inclusive) of one workspace,
    inside the caller's transaction; the caller has deleted whatever was stored for them."""

    def __init__(self, *, workspace: Workspace, first: datetime.date, last: datetime.date) -> None:
        self.workspace = workspace
        self.sql = Dialect(connection.vendor)
        self.first, self.last = first, last
        self.lookback = int(workspace.lookback_days)
        self.cap = workspace.daily_event_cap
        self.filtered = bool(workspace.account_filter)
        self.params = {
            "ws": workspace.id,
            "product": workspace.product_id,
            "first": connection.ops.adapt_datefield_value(first),
            "last": connection.ops.adapt_datefield_value(last),
            "rollup_start": connection.ops.adapt_datefield_value(
                first - datetime.timedelta(days=self.lookback - 1)
            ),
        }
        self.cursor = connection.cursor()
        self._temp_tables: list[str] = []
        if self.sql.postgres:
            for setting in (f"work_mem = '{int(settings.SCORING_WORK_MEM_MB)}MB'", "jit = off"):
                self.cursor.execute(f"SET LOCAL {setting}")

    def run(self, sql: str) -> int:
        self.cursor.execute(sql, self.params)
        return self.cursor.rowcount

    def temp(self, name: str, columns: str) -> None:
        """Create (or empty) a temporary table that close() drops."""
        self.cursor.execute(f"DROP TABLE IF EXISTS {name}")
        self.cursor.execute(f"CREATE TEMPORARY TABLE {name} ({columns})")
        if name not in self._temp_tables:
            self._temp_tables.append(name)

    def analyze(self, *names: str) -> None:
        if self.sql.postgres:
            for name in names:
                self.cursor.execute(f"ANALYZE {name}")

    def close(self) -> None:
        """Drop this build's temporary tables: the connection outlives the build."""
        for name in self._temp_tables:
            self.cursor.execute(f"DROP TABLE IF EXISTS {name}")
        self.cursor.close()

    def build(self) -> tuple[int, int]:
        """Compute and store the days; returns the user and account points written."""
        self.load_weights()
        if self.filtered:
            self.load_scope()
        self.load_days()
        if (self.last - self.first).days < DIRECT_SUM_DAYS:
            self.raw_from_rollups()
        else:
            self.user_points()
            self.raw_by_day("user")
            self.account_points()
            self.raw_by_day("account")
        return self.store_users(), self.store_accounts()

    # --- setup ------------------------------------------------------------------------------

    def load_weights(self) -> None:
        self.temp("eds_h_weight", "event_name VARCHAR(255) PRIMARY KEY, weight INTEGER NOT NULL")
        self.cursor.executemany(
            "INSERT INTO eds_h_weight (event_name, weight) VALUES (%s, %s)",
            list(self.workspace.weights.values_list("event_name", "weight")),
        )
        self.analyze("eds_h_weight")

    def load_scope(self) -> None:
        """The accounts the workspace's filter admits, and the users linked to them."""
        self.temp("eds_h_match_account", "account_id BIGINT PRIMARY KEY")
        queryset = accounts_admitted(
            Account.objects.filter(product_id=self.workspace.product_id),
            self.workspace.account_filter,
        )
        sql, params = queryset.values("id").query.sql_with_params()
        self.cursor.execute(f"INSERT INTO eds_h_match_account (account_id) {sql}", params)
        self.temp("eds_h_scope_user", "user_id BIGINT PRIMARY KEY")
        self.run(
            """
            INSERT INTO eds_h_scope_user (user_id)
            SELECT DISTINCT m.user_id FROM engagement_membership m
            JOIN eds_h_match_account a ON a.account_id = m.account_id
            """
        )
        self.analyze("eds_h_match_account", "eds_h_scope_user")

    def load_days(self) -> None:
        """The days to compute, as a table."""
        self.temp("eds_h_day", "day DATE PRIMARY KEY")
        days = (self.last - self.first).days + 1
        self.cursor.executemany(
            "INSERT INTO eds_h_day (day) VALUES (%s)",
            [
                (connection.ops.adapt_datefield_value(self.first + datetime.timedelta(days=n)),)
                for n in range(days)
            ],
        )

    # --- the shared steps ---------------------------------------------------------------------

    def capped(self, expr: str) -> str:
        if self.cap is None:
            return expr
        return f"(CASE WHEN {expr} > {int(self.cap)} THEN {int(self.cap)} ELSE {expr} END)"

    def day_plus(self, day: str, days: int) -> str:
        if self.sql.postgres:
            return f"({day} + {int(days)})"
        return f"date({day}, '{int(days):+d} days')"

    def raw_by_day(self, kind: str) -> None:
        """From eds_h_<kind>_points (a subject's weighted points of one day) to eds_h_<kind>_day:
        the raw score of every day first..last on which it is not zero.

        A day's points count from that day until `lookback` days later: the running sum of
        those entries and exits, per subject in day order, is the raw score from each change
        to the next, and each stretch is spread over the days it covers.
        """
        column = f"{kind}_id"
        points, change, out = f"eds_h_{kind}_points", f"eds_h_{kind}_change", f"eds_h_{kind}_day"
        self.temp(change, f"{column} BIGINT, day DATE, raw BIGINT, next_day DATE")
        self.run(
            f"""
            INSERT INTO {change} ({column}, day, raw, next_day)
            SELECT {column}, day, raw, LEAD(day) OVER (PARTITION BY {column} ORDER BY day)
            FROM (
                SELECT {column}, day,
                    SUM(SUM(delta)) OVER (PARTITION BY {column} ORDER BY day) AS raw
                FROM (
                    SELECT {column}, day, points AS delta FROM {points}
                    UNION ALL
                    SELECT {column}, {self.day_plus("day", self.lookback)}, -points FROM {points}
                ) c
                GROUP BY {column}, day
            ) s
            """
        )
        self.temp(out, f"{column} BIGINT, day DATE, raw BIGINT")
        if self.sql.postgres:
            # Offsets from the first day: generate_series over dates would go through
            # timestamps.
            self.run(
                f"""
                INSERT INTO {out} ({column}, day, raw)
                SELECT s.{column}, CAST(%(first)s AS DATE) + g.n, s.raw FROM {change} s
                CROSS JOIN LATERAL generate_series(
                    GREATEST(s.day, CAST(%(first)s AS DATE)) - CAST(%(first)s AS DATE),
                    LEAST(COALESCE(s.next_day - 1, CAST(%(last)s AS DATE)),
                        CAST(%(last)s AS DATE)) - CAST(%(first)s AS DATE)) AS g(n)
                WHERE s.raw > 0 AND s.day <= %(last)s
                AND (s.next_day IS NULL OR s.next_day > %(first)s)
                """
            )
        else:
            self.run(
                f"""
                INSERT INTO {out} ({column}, day, raw)
                SELECT s.{column}, d.day, s.raw FROM {change} s
                JOIN eds_h_day d ON d.day >= s.day
                    AND (s.next_day IS NULL OR d.day < s.next_day)
                WHERE s.raw > 0
                """
            )
        self.analyze(out)

    # --- a day or two: straight from the rollups ----------------------------------------------

    def raw_from_rollups(self) -> None:
        """eds_h_user_day and eds_h_account_day for a day or two (the daily step): each day's
        window summed straight from the rollups, users and accounts in one pass over them on
        PostgreSQL (two on SQLite, which has no grouping sets).

        The user days are stored in subject order, the order of the history's primary key: a
        million new points then go into the index in one pass over it instead of a million
        random page visits (5x faster at that size).
        """
        self.temp("eds_h_user_day", "user_id BIGINT, day DATE, raw BIGINT")
        self.temp("eds_h_account_day", "account_id BIGINT, day DATE, raw BIGINT")
        rows = self.window_rows()
        if self.sql.postgres:
            self.run(
                f"""
                WITH sums AS (
                    SELECT GROUPING(x.account_id) AS of_user, x.user_id, x.account_id, x.day,
                        SUM(x.user_points) AS user_raw, SUM(x.account_points) AS account_raw
                    FROM ({rows}) x
                    GROUP BY GROUPING SETS ((x.user_id, x.day), (x.account_id, x.day))
                ), users AS (
                    INSERT INTO eds_h_user_day (user_id, day, raw)
                    SELECT user_id, day, user_raw FROM sums WHERE of_user = 1 AND user_raw > 0
                    ORDER BY user_id, day
                )
                INSERT INTO eds_h_account_day (account_id, day, raw)
                SELECT account_id, day, account_raw FROM sums
                WHERE of_user = 0 AND account_id IS NOT NULL AND account_raw > 0
                """
            )
        else:
            self.run(
                f"""
                INSERT INTO eds_h_user_day (user_id, day, raw)
                SELECT x.user_id, x.day, SUM(x.user_points) FROM ({rows}) x
                GROUP BY x.user_id, x.day HAVING SUM(x.user_points) > 0
                ORDER BY x.user_id, x.day
                """
            )
            self.run(
                f"""
                INSERT INTO eds_h_account_day (account_id, day, raw)
                SELECT x.account_id, x.day, SUM(x.account_points) FROM ({rows}) x
                WHERE x.account_id IS NOT NULL
                GROUP BY x.account_id, x.day HAVING SUM(x.account_points) > 0
                """
            )
        self.analyze("eds_h_user_day", "eds_h_account_day")

    def window_rows(self) -> str:
        """Every rollup row in the window of a day first..last, once per such day, with the
        weighted points it gives its user and its account that day (0 to one out of scope)."""
        weight = "COALESCE(w.weight, 1)"
        if self.cap is None:
            user_points = f"r.count * {weight}"
        else:
            # The user's cap applies to a day's events of one name whichever accounts they went
            # to: the capped total of those rows, counted on the first of them.
            same = "PARTITION BY r.user_id, r.event_name, r.day, d.day"
            user_points = (
                f"CASE WHEN ROW_NUMBER() OVER ({same} ORDER BY r.account_key) = 1 "
                f"THEN {self.capped(f'SUM(r.count) OVER ({same})')} * {weight} ELSE 0 END"
            )
        account_points = f"{self.capped('r.count')} * {weight}"
        joins, scoped, account_in_scope = "", "", "r.account_id IS NOT NULL"
        if self.filtered:
            # The rows of users in scope, and those of accounts in scope whoever sent them.
            joins = """
                LEFT JOIN eds_h_scope_user su ON su.user_id = r.user_id
                LEFT JOIN eds_h_match_account ma ON ma.account_id = r.account_id
            """
            scoped = "AND (su.user_id IS NOT NULL OR ma.account_id IS NOT NULL)"
            user_points = f"CASE WHEN su.user_id IS NULL THEN 0 ELSE {user_points} END"
            account_in_scope = "ma.account_id IS NOT NULL"
        window_start = self.day_plus("d.day", 1 - self.lookback)
        return f"""
            SELECT r.user_id, r.account_id, d.day, {user_points} AS user_points,
                CASE WHEN {account_in_scope} THEN {account_points} ELSE 0 END AS account_points
            FROM engagement_eventrollup r
            JOIN eds_h_day d ON r.day <= d.day AND r.day >= {window_start}
            LEFT JOIN eds_h_weight w ON w.event_name = r.event_name
            {joins}
            WHERE r.product_id = %(product)s
            AND r.day >= %(rollup_start)s AND r.day <= %(last)s {scoped}
        """

    # --- longer ranges: each day's points, then their running sums --------------------------

    def user_points(self) -> None:
        """eds_h_user_points: each user's weighted points of each day with any."""
        scope = "JOIN eds_h_scope_user s ON s.user_id = r.user_id" if self.filtered else ""
        self.temp("eds_h_user_points", "user_id BIGINT, day DATE, points BIGINT")
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
        self.run(
            f"""
            INSERT INTO eds_h_user_points (user_id, day, points)
            SELECT e.user_id, e.day, SUM(e.counted * COALESCE(w.weight, 1))
            FROM ({counted}) e
            LEFT JOIN eds_h_weight w ON w.event_name = e.event_name
            GROUP BY e.user_id, e.day
            HAVING SUM(e.counted * COALESCE(w.weight, 1)) > 0
            """
        )
        self.analyze("eds_h_user_points")

    def account_points(self) -> None:
        """eds_h_account_points: each account's weighted points of each day with any."""
        in_scope = (
            "JOIN eds_h_match_account s ON s.account_id = r.account_id" if self.filtered else ""
        )
        # The cap applies to each user's events of a day within the account (one rollup row).
        self.temp("eds_h_account_points", "account_id BIGINT, day DATE, points BIGINT")
        self.run(
            f"""
            INSERT INTO eds_h_account_points (account_id, day, points)
            SELECT r.account_id, r.day, SUM({self.capped("r.count")} * COALESCE(w.weight, 1))
            FROM engagement_eventrollup r {in_scope}
            LEFT JOIN eds_h_weight w ON w.event_name = r.event_name
            WHERE r.product_id = %(product)s AND r.account_id IS NOT NULL
            AND r.day >= %(rollup_start)s AND r.day <= %(last)s
            GROUP BY r.account_id, r.day
            HAVING SUM({self.capped("r.count")} * COALESCE(w.weight, 1)) > 0
            """
        )
        self.analyze("eds_h_account_points")

    # --- storing the points -----------------------------------------------------------------

    def store_users(self) -> int:
        self.day_percentiles()
        return self.run(
            f"""
            INSERT INTO engagement_userscoreday
                (user_id, workspace_id, day, engagement_score, raw_score)
            SELECT u.user_id, %(ws)s, u.day, {self.sql.score("u.raw", "p.p90")}, u.raw
            FROM eds_h_user_day u JOIN eds_h_p90 p ON p.day = u.day
            """
        )

    def day_percentiles(self) -> None:
        """Each day's p90 of the non-zero raw scores (eds_h_user_day holds only those)."""
        self.temp("eds_h_p90", f"day DATE PRIMARY KEY, p90 {self.sql.float}")
        if self.sql.postgres:
            self.run(
                """
                INSERT INTO eds_h_p90 (day, p90)
                SELECT day, percentile_cont(0.9) WITHIN GROUP (ORDER BY raw)
                FROM eds_h_user_day GROUP BY day
                """
            )
            return
        raws: dict[object, list[float]] = defaultdict(list)
        self.run("SELECT day, raw FROM eds_h_user_day")
        for day, raw in self.cursor.fetchall():
            raws[day].append(raw)
        self.cursor.executemany(
            "INSERT INTO eds_h_p90 (day, p90) VALUES (%s, %s)",
            [(day, percentile_90(values)) for day, values in raws.items()],
        )

    def store_accounts(self) -> int:
        in_scope = (
            "JOIN eds_h_match_account s ON s.account_id = m.account_id" if self.filtered else ""
        )
        # Every linked user counts in an account's mean, with or without a point that day.
        self.temp("eds_h_account_total", "account_id BIGINT PRIMARY KEY, total INTEGER")
        self.run(
            f"""
            INSERT INTO eds_h_account_total (account_id, total)
            SELECT m.account_id, COUNT(*) FROM engagement_membership m {in_scope}
            JOIN engagement_user usr ON usr.id = m.user_id
            WHERE usr.product_id = %(product)s
            GROUP BY m.account_id
            """
        )
        self.analyze("eds_h_account_total")
        self.temp("eds_h_account_mean", f"account_id BIGINT, day DATE, mean {self.sql.float}")
        self.run(
            f"""
            INSERT INTO eds_h_account_mean (account_id, day, mean)
            SELECT m.account_id, u.day,
                CAST(SUM({self.sql.score("u.raw", "p.p90")}) AS {self.sql.float}) / MAX(t.total)
            FROM eds_h_user_day u
            JOIN eds_h_p90 p ON p.day = u.day
            JOIN engagement_membership m ON m.user_id = u.user_id
            JOIN eds_h_account_total t ON t.account_id = m.account_id
            GROUP BY m.account_id, u.day
            """
        )
        score = self.sql.round_half_up("mean")
        return self.run(
            f"""
            INSERT INTO engagement_accountscoreday
                (account_id, workspace_id, day, engagement_score, raw_score)
            SELECT account_id, %(ws)s, day, MAX(score), MAX(raw) FROM (
                SELECT account_id, day, {score} AS score, 0 AS raw FROM eds_h_account_mean
                UNION ALL
                SELECT account_id, day, 0, raw FROM eds_h_account_day
            ) x
            GROUP BY account_id, day
            HAVING MAX(score) > 0 OR MAX(raw) > 0
            """
        )
