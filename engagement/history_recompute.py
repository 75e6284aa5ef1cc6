"""What a recompute of a few days of score history needs (engagement/history_build.py runs it):
the raw scores of up to a week from each subject's daily changes, and writing only the points
that differ from the stored ones.

After late events the days from theirs to yesterday are recomputed for every user and account (a
day's p90 ties their scores together), at a million users within a minute: the full build's
ordering of every day total, and rewriting millions of unchanged points, took most of 94 s there
(docs/benchmarks.md).
"""

# SQL here is assembled from fixed table and column names and dialect snippets; every value is
# a query parameter.
# ruff: noqa: S608

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from django.db import connection

if TYPE_CHECKING:
    from engagement.history_build import HistoryBuilder


KINDS = ("user", "account")


def raw_by_changes(builder: HistoryBuilder, kinds: tuple[str, ...] = KINDS) -> None:
    """eds_h_<kind>_day of each of `kinds` (users, accounts) for a range of up to DELTA_DAYS
    days (the daily step, a recompute after late events), in one pass over the rollups of its
    windows (and, for more than a day, one over those leaving the window within the range).

    The raw score of the first day is the sum of its window; each later day adds the points
    of its own day and takes off those of the day that left its window. So each rollup row
    gives its subjects one change on the day it enters (the first day for rows of earlier
    days) and, when within the range, one on the day it leaves; a subject's changes summed
    in day order give its raw score from each change to the next. Users and accounts come
    out of the same pass over the rollups (grouping sets) on PostgreSQL, two on SQLite.
    The days come out subject by subject, the order of the history's primary key: a
    million new points then go into its index in one pass over it (see raw_by_day).
    """
    _sum_changes(builder, kinds)
    for kind in kinds:
        _raw_from_changes(builder, kind)
    builder.analyze(*(f"eds_h_{kind}_day" for kind in kinds))


def _sum_changes(builder: HistoryBuilder, kinds: tuple[str, ...]) -> None:
    """eds_h_<kind>_change of each of `kinds`: each subject's change of raw score on each day
    number k of the range that has one (k = 0: the first day's whole window)."""
    look = builder.lookback
    accounts = "account" in kinds
    changes = f"""
        SELECT p.user_id, p.account_id, CASE WHEN p.n > 0 THEN p.n ELSE 0 END AS k,
            p.user_points, p.account_points
        FROM ({rollup_points(builder, accounts=accounts)}) p
    """
    extra = {}
    if not builder.single_day:
        # A row leaves the window `look` days after its own day: within the range for the rows
        # of days up to `look` before its last, read apart (a day's step has none). Joining
        # every row to a sign instead doubled the rows of the one pass (docs/benchmarks.md).
        extra["exits_until"] = connection.ops.adapt_datefield_value(
            builder.last - datetime.timedelta(days=look)
        )
        changes += f"""
            UNION ALL
            SELECT p.user_id, p.account_id, p.n + {look} AS k,
                -p.user_points AS user_points, -p.account_points AS account_points
            FROM ({rollup_points(builder, until="%(exits_until)s", accounts=accounts)}) p
        """
    for kind in kinds:
        builder.temp(f"eds_h_{kind}_change", f"{kind}_id BIGINT, k INTEGER, points BIGINT")
    # Users and accounts from one pass over the rollups (grouping sets) on PostgreSQL, a pass
    # for each on SQLite (DatabaseBackend.history_changes_sum).
    builder.backend.history_changes_sum(builder, changes, kinds, extra)
    builder.analyze("eds_h_day", *(f"eds_h_{kind}_change" for kind in kinds))


def changes_sum_each(
    builder: HistoryBuilder, changes: str, kinds: tuple[str, ...], extra: dict
) -> None:
    """eds_h_<kind>_change of each of `kinds` from `changes` (_sum_changes), one pass over the
    rollups for each kind."""
    for kind in kinds:
        where = "WHERE x.account_id IS NOT NULL" if kind == "account" else ""
        builder.run(
            f"""
            INSERT INTO eds_h_{kind}_change ({kind}_id, k, points)
            SELECT x.{kind}_id, x.k, SUM(x.{kind}_points) FROM ({changes}) x {where}
            GROUP BY x.{kind}_id, x.k
            """,
            extra,
        )


def day_table_columns(kind: str) -> str:
    """The columns of eds_h_<kind>_day: each subject's raw score of each day it has one."""
    return f"{kind}_id BIGINT, day DATE, raw BIGINT"


def _raw_from_changes(builder: HistoryBuilder, kind: str) -> None:
    """eds_h_<kind>_day from eds_h_<kind>_change: each change's running sum is the raw score
    from its day to the subject's next change, one row per day it covers that is not zero."""
    column, span = f"{kind}_id", (builder.last - builder.first).days
    builder.temp(f"eds_h_{kind}_day", day_table_columns(kind))
    if builder.single_day:
        # The daily step: a subject's one change (k = 0, its whole window) is its raw score of
        # the day, so the running sums, their window pass and the join to the days reduce to
        # the change itself: 0.5-0.7 s against 1.0-1.4 s on each connection at a million users
        # (docs/benchmarks.md, 2026-11-27).
        builder.run(
            f"""
            INSERT INTO eds_h_{kind}_day ({column}, day, raw)
            SELECT {column}, %(first)s, points FROM eds_h_{kind}_change
            WHERE points > 0
            ORDER BY {column}
            """
        )
        return
    ordered = f"PARTITION BY {column} ORDER BY k"
    builder.run(
        f"""
        INSERT INTO eds_h_{kind}_day ({column}, day, raw)
        SELECT c.{column}, d.day, c.raw FROM (
            SELECT {column}, k, CAST(SUM(points) OVER ({ordered}) AS BIGINT) AS raw,
                LEAD(k, 1, {span + 1}) OVER ({ordered}) AS stop
            FROM eds_h_{kind}_change
        ) c
        JOIN eds_h_day d ON d.n >= c.k AND d.n < c.stop
        WHERE c.raw > 0
        ORDER BY c.{column}, d.day
        """
    )


def rollup_points(
    builder: HistoryBuilder, *, until: str = "%(last)s", accounts: bool = True
) -> str:
    """Every rollup row in the window of a day first..last (up to the day `until`, SQL), with
    its day's number n and the weighted points it gives its user and its account (0 to one out
    of scope); in a hierarchy, a row for each of the account's ancestors too, giving its points
    to that account only. Without `accounts`, the rows of users in scope, their accounts' points
    left at 0 and the lineage not followed."""
    weight = "COALESCE(w.weight, 1)"
    if builder.cap is None:
        user_points = f"r.count * {weight}"
    else:
        # The user's cap applies to a day's events of one name whichever accounts they went
        # to: the capped total of those rows, counted on the first of them.
        same = "PARTITION BY r.user_id, r.event_name, r.day"
        user_points = (
            f"CASE WHEN ROW_NUMBER() OVER ({same} ORDER BY r.account_key) = 1 "
            f"THEN {builder.capped(f'SUM(r.count) OVER ({same})')} * {weight} ELSE 0 END"
        )
    account_points = f"{builder.capped('r.count')} * {weight}" if accounts else "0"
    joins, scoped, account_in_scope = "", "", "r.account_id IS NOT NULL"
    if builder.filtered and not accounts:
        joins = "JOIN eds_t_scope_user su ON su.user_id = r.user_id"
    elif builder.filtered:
        # The rows of users in scope, and those of accounts in scope whoever sent them (in a
        # hierarchy, an account's scope is decided per ancestor: _up_the_lineage).
        joins = "LEFT JOIN eds_t_scope_user su ON su.user_id = r.user_id"
        user_points = f"CASE WHEN su.user_id IS NULL THEN 0 ELSE {user_points} END"
        if not builder.lineage:
            joins += " LEFT JOIN eds_t_match_account ma ON ma.account_id = r.account_id"
            scoped = "AND (su.user_id IS NOT NULL OR ma.account_id IS NOT NULL)"
            account_in_scope = "ma.account_id IS NOT NULL"
    rows = f"""
        SELECT r.user_id, r.account_id, {builder.day_number("r.day")} AS n,
            {user_points} AS user_points,
            CASE WHEN {account_in_scope} THEN {account_points} ELSE 0 END AS account_points
        FROM engagement_eventrollup r
        LEFT JOIN eds_t_weight w ON w.event_name = r.event_name
        {joins}
        WHERE r.product_id = %(product)s
        AND r.day >= %(rollup_start)s AND r.day <= {until} {scoped}
    """
    return _up_the_lineage(builder, rows) if builder.lineage and accounts else rows


def _up_the_lineage(builder: HistoryBuilder, rows: str) -> str:
    """The rows of rollup_points once for each ancestor of their account (itself included):
    the user's points on the account's own row only, the account's points on each row whose
    ancestor is in scope. Rows without an account keep theirs."""
    scope, in_scope = "", ""
    if builder.filtered:
        scope = "LEFT JOIN eds_t_match_account ma ON ma.account_id = h.ancestor_id"
        in_scope = "AND ma.account_id IS NOT NULL"
    return f"""
        SELECT p.user_id, h.ancestor_id AS account_id, p.n,
            CASE WHEN h.ancestor_id IS NULL OR h.ancestor_id = p.account_id
                THEN p.user_points ELSE 0 END AS user_points,
            CASE WHEN h.ancestor_id IS NOT NULL {in_scope}
                THEN p.account_points ELSE 0 END AS account_points
        FROM ({rows}) p
        LEFT JOIN eds_t_lineage h ON h.account_id = p.account_id
        {scope}
    """


def store_differences(builder: HistoryBuilder, kind: str, points: str) -> int:
    """Bring the stored points of days first..last to `points` (rows of subject id, day,
    score, raw), writing only what differs; returns the points written or deleted.

    After late events most points of those days keep their values (a day's p90 moves
    little, and most subjects' raw scores not at all): rewriting millions of unchanged rows
    was most of a recompute of a few days at a million users. One full join of the new
    points with the stored ones gives the differences; each is then written by key.
    """
    column, table = f"{kind}_id", f"engagement_{kind}scoreday"
    diff = f"eds_h_{kind}_diff"
    # Changed and new points with their values; points no longer scoring with NULLs.
    builder.temp(diff, f"{column} BIGINT, day DATE, score INTEGER, raw {builder.sql.float}")
    builder.run(
        f"""
        INSERT INTO {diff} ({column}, day, score, raw)
        SELECT COALESCE(n.{column}, s.{column}), COALESCE(n.day, s.day), n.score, n.raw
        FROM ({points}) n
        FULL JOIN (
            SELECT {column}, day, engagement_score, raw_score FROM {table}
            WHERE workspace_id = %(ws)s AND day >= %(first)s AND day <= %(last)s
        ) s ON s.{column} = n.{column} AND s.day = n.day
        WHERE n.{column} IS NULL OR s.{column} IS NULL
            OR s.engagement_score <> n.score OR s.raw_score <> n.raw
        """
    )
    builder.analyze(diff)
    deleted = builder.run(
        f"""
        DELETE FROM {table} WHERE ({column}, workspace_id, day) IN (
            SELECT {column}, %(ws)s, day FROM {diff} WHERE score IS NULL)
        """
    )
    written = builder.run(
        f"""
        INSERT INTO {table} ({column}, workspace_id, day, engagement_score, raw_score)
        SELECT {column}, %(ws)s, day, score, raw FROM {diff} WHERE score IS NOT NULL
        ORDER BY {column}, day
        ON CONFLICT ({column}, workspace_id, day) DO UPDATE SET
            engagement_score = excluded.engagement_score, raw_score = excluded.raw_score
        """
    )
    return deleted + written
