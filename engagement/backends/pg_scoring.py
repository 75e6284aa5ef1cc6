"""The PostgreSQL statements of the scoring engine and the history build: where the algorithm in
engagement/scoring and engagement/history_* meets a step PostgreSQL runs its own way (one pass
with bit masks, percentile_cont, grouping sets, generate_series, planner settings). The portable
statements of the same steps are in portable_scoring.py; both give the same results.
"""

# SQL is assembled from fixed table and column names and dialect snippets; every value is a
# query parameter.
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from engagement.history_recompute import KINDS, changes_sum_each
from engagement.scoring.aggregation import (
    ACCOUNTS,
    USERS,
    descendants_of_scope,
    rollups_of,
    subject_of,
)

if TYPE_CHECKING:
    from engagement.history_build import HistoryBuilder
    from engagement.scoring.aggregation import Target, UserIds
    from engagement.scoring.run import ScoringRun, StatementRunner


# --- a job's session -----------------------------------------------------------------------


def job_settings(cursor, settings: Sequence[str]) -> None:
    """The job's planner settings, for its transaction only."""
    for setting in settings:
        cursor.execute(f"SET LOCAL {setting}")


def temp_table_create(cursor, name: str, columns: str) -> None:
    # ON COMMIT DROP: should the job never drop it (an error), the table still ends with the
    # job's transaction, and no session state outlives it (a transaction pooler may give the
    # next transaction this server session).
    cursor.execute(f"CREATE TEMPORARY TABLE {name} ({columns}) ON COMMIT DROP")


@contextmanager
def planner_method(cursor, setting: str, allowed: bool) -> Iterator[None]:
    cursor.execute(f"SHOW {setting}")
    before = "on" if cursor.fetchone()[0] == "on" else "off"
    cursor.execute(f"SET LOCAL {setting} = {'on' if allowed else 'off'}")
    try:
        yield
    finally:
        cursor.execute(f"SET LOCAL {setting} = {before}")


def temp_tables_analyze(cursor, names: Sequence[str]) -> None:
    # Fresh temp tables have no statistics; the planner needs them to pick index lookups
    # for a handful of changed users and hash joins for a million.
    for name in names:
        cursor.execute(f"ANALYZE {name}")


# --- the scoring engine ----------------------------------------------------------------------


def subjects_aggregate(run: ScoringRun, target: Target, ids: UserIds | None = None) -> None:
    """One pass over the rollups, the active days of each event travelling as a bit mask."""
    key, sql = target.key, run.sql
    within, extra = "", {}
    if ids is not None:
        within = "AND r.user_id >= %(ids_from)s AND r.user_id < %(ids_to)s"
        extra = {"ids_from": ids[0], "ids_to": ids[1]}
    per_event = _per_event(run, target, within)
    if target is ACCOUNTS and run.lineage:
        per_event = _up_the_lineage(run, per_event)
    adopted = "COUNT(*) FILTER (WHERE e.weight > 0 AND e.counted > 0)"
    if run.has_features:
        adopted = "COUNT(DISTINCT e.feature) FILTER (WHERE e.n > 0)"
    breakdown = sql.breakdown(
        "e", arrives_in_name_order=target is USERS, quoted_names=_quoted_names(run)
    )
    last_at_column, last_at_value = "", ""
    if target.tracks_last_at:
        last_at_column, last_at_value = ", last_at", ", MAX(e.last_at)"
    statement = f"""
        INSERT INTO {target.table} ({key}, raw, previous_raw, events, adopted, active_days,
            breakdown{last_at_column})
        SELECT e.{key}, SUM(e.counted * e.weight), SUM(e.previous_counted * e.weight),
            SUM(e.n), {adopted},
            COALESCE(bit_count(CAST(bit_or(e.days) FILTER (WHERE e.weight > 0) AS BIT(64))), 0),
            {breakdown}{last_at_value}
        FROM ({per_event}) e
        GROUP BY e.{key}
        """
    # Users: not hashed, so their per-event groups come out sorted by user and event name,
    # the order the breakdown text takes. Accounts: the rollups stream in user order (see
    # ScoringRun) and an account's events are spread over its users; hashing its million
    # (account, event) groups costs less than sorting the ten million rollups by account
    # (docs/benchmarks.md).
    with run.hash_aggregation(allowed=target is ACCOUNTS):
        run.run(statement, extra)


def _quoted_names(run: ScoringRun) -> str:
    """The product's event names with their JSON text, as the %(quoted_names)s JSON object the
    breakdown looks them up in (dialect.breakdown); returns that parameter.

    Escaped once per refresh: `to_json` on each of the users' 7.8 million (user, event)
    groups was a fifth of the users' aggregation (docs/benchmarks.md). PostgreSQL escapes
    them here too, so the text is the same as the name escaped where it is used."""
    if "quoted_names" not in run.params:
        run.params["quoted_names"] = run.scalar(
            "SELECT CAST(COALESCE(jsonb_object_agg(name, to_json(name)::text), '{}') AS TEXT) "
            "FROM engagement_eventname WHERE product_id = %(product)s"
        )
    return "%(quoted_names)s"


def _weight_of(event_name: str) -> str:
    """The workspace's weight of an event name (1 when unlisted).

    A lookup in a JSON object bound once per statement rather than a join: a hash join
    with the weights would lose the user order the rollups stream in, and the planner
    would then sort millions of rows again before the per-user aggregation. It is a column
    of the per-event grouping (_event_lookups), so it is computed once per subject and event
    name, not once for every reference to it in the outer aggregates.
    """
    return f"COALESCE(CAST(CAST(%(weights)s AS JSONB) ->> {event_name} AS INTEGER), 1)"


def _event_lookups(run: ScoringRun, alias: str) -> str:
    """The weight of the event name in `alias`, and its feature when the workspace has
    features: columns of a per-event grouping, so each is looked up once per subject and
    event name."""
    lookups = f", {_weight_of(f'{alias}.event_name')} AS weight"
    if run.has_features:
        lookups += f", CAST(%(features)s AS JSONB) ->> {alias}.event_name AS feature"
    return lookups


def _per_event(run: ScoringRun, target: Target, within: str = "") -> str:
    """Per subject and event name: the counted events and the events of the window, the counted
    events one period earlier, the window's active days as a bit mask (and its latest event),
    the name's weight (and feature). In a hierarchy, an account's own rollups only
    (_up_the_lineage adds its descendants' and looks the weights up on its own rows).

    The per-subject aggregation reads these rows straight from this grouping: behind one more
    subquery layer the planner lost their subject order and sorted the users' 7.8 million
    rows again on disk (docs/benchmarks.md)."""
    key = target.key
    own = target is ACCOUNTS and run.lineage
    subject = "r.account_id" if own else subject_of(run, target)
    rollups = _own_account_rollups(run) if own else rollups_of(run, target, within=within)
    if run.cap is None or target.caps_each_rollup:
        last_at = ", r.last_at" if target.tracks_last_at else ""
        days = f"""
            SELECT {subject} AS {key}, r.event_name, r.day, r.count AS n,
                {run.capped("r.count")} AS counted{last_at}
            {rollups}
        """
    else:
        last_at = ", MAX(r.last_at) AS last_at" if target.tracks_last_at else ""
        days = f"""
            SELECT {subject} AS {key}, r.event_name, r.day, SUM(r.count) AS n,
                {run.capped("SUM(r.count)")} AS counted{last_at}
            {rollups}
            GROUP BY {subject}, r.event_name, r.day
        """
    event_last_at = ""
    if target.tracks_last_at:
        event_last_at = ", MAX(d.last_at) FILTER (WHERE d.day >= %(start)s) AS last_at"
    return f"""
        SELECT d.{key}, d.event_name,
            COALESCE(SUM(d.counted) FILTER (WHERE d.day >= %(start)s), 0) AS counted,
            COALESCE(SUM(d.n) FILTER (WHERE d.day >= %(start)s), 0) AS n,
            COALESCE(SUM(d.counted) FILTER (WHERE d.day < %(start)s), 0) AS previous_counted,
            bit_or(CAST(1 AS BIGINT) << (d.day - %(prev_start)s))
                FILTER (WHERE d.day >= %(start)s) AS days{event_last_at}
            {"" if own else _event_lookups(run, "d")}
        FROM ({days}) d
        GROUP BY d.{key}, d.event_name
    """


def _own_account_rollups(run: ScoringRun) -> str:
    """FROM and WHERE of the accounts' own rollups over both windows (alias r), limited to the
    scoped accounts and their descendants."""
    scope = "" if run.everyone else f"AND r.account_id IN ({descendants_of_scope()})"
    return f"""
        FROM engagement_eventrollup r
        WHERE r.product_id = %(product)s {ACCOUNTS.rollup_filter}
        AND r.day >= %(prev_start)s AND r.day <= %(end)s {scope}
    """


def _up_the_lineage(run: ScoringRun, per_event: str) -> str:
    """Each account's per-event figures summed over itself and its descendants: the per-event
    figures of every account counted for each of its ancestors (itself included). Rolling up
    one row per account and event, not every rollup row, keeps the join small: its sums, the
    days' bit_or and the latest time combine the same either way, since an account's cap
    applies to each rollup row."""
    scope = "" if run.everyone else "JOIN eds_t_scope_account s ON s.account_id = h.ancestor_id"
    return f"""
        SELECT h.ancestor_id AS account_id, o.event_name, SUM(o.counted) AS counted,
            SUM(o.n) AS n, SUM(o.previous_counted) AS previous_counted,
            bit_or(o.days) AS days, MAX(o.last_at) AS last_at{_event_lookups(run, "o")}
        FROM ({per_event}) o
        JOIN eds_t_lineage h ON h.account_id = o.account_id {scope}
        GROUP BY h.ancestor_id, o.event_name
    """


def raw_percentiles(
    run: StatementRunner, table: str, raw: str, previous_raw: str, where: str
) -> tuple[float, float]:
    run.run(
        f"""
        SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY {raw})
                FILTER (WHERE {raw} > 0),
            percentile_cont(0.9) WITHIN GROUP (ORDER BY {previous_raw})
                FILTER (WHERE {previous_raw} > 0)
        FROM {table} WHERE {where}
        """
    )
    now, before = run.cursor.fetchone()
    return float(now or 0), float(before or 0)


# --- the history build ---------------------------------------------------------------------


def history_day_percentiles(builder: StatementRunner) -> None:
    """percentile_cont(0.9)'s own interpolation read off each day's histogram of raw scores (a
    few thousand rows) instead of sorting each day's million rows (13 s down to 3 for a month
    of a million users). Position 0.9 x (n - 1) counted from 0; the values at its floor and
    ceiling are the first raw scores whose running count passes them."""
    builder.run(
        """
        INSERT INTO eds_h_p90 (day, p90)
        SELECT day, low + (high - low) * (position - FLOOR(position)) FROM (
            SELECT day, position,
                MIN(raw) FILTER (WHERE upto > FLOOR(position)) AS low,
                MIN(raw) FILTER (WHERE upto > CEIL(position)) AS high
            FROM (
                SELECT day, CAST(raw AS DOUBLE PRECISION) AS raw,
                    SUM(rows) OVER (PARTITION BY day ORDER BY raw) AS upto,
                    CAST(0.9 AS DOUBLE PRECISION) * (SUM(rows) OVER (PARTITION BY day) - 1)
                        AS position
                FROM (
                    SELECT day, raw, COUNT(*) AS rows FROM eds_h_user_day
                    GROUP BY day, raw
                ) histogram
            ) counted
            GROUP BY day, position
        ) ends
        """
    )


def history_changes_sum(
    builder: HistoryBuilder, changes: str, kinds: tuple[str, ...], extra: dict
) -> None:
    """Users and accounts from the same pass over the rollups (grouping sets); one kind alone
    as on SQLite."""
    if kinds != KINDS:
        changes_sum_each(builder, changes, kinds, extra)
        return
    source = f"({changes})"
    if builder.single_day:
        # The daily step: every row is a change of day 0, so a user's rows of the whole
        # window (ten on average) are summed into one per account they went to before
        # the two groupings; the grouping sets over every rollup row hashed each row into
        # both and took 16.1-18.2 s, this 13.2-14.1 s (docs/benchmarks.md, 2026-11-26 late
        # night). Over a longer range the pairs are nearly as many as the rows (a change
        # per day in the range, and the exits): no faster there.
        source = f"""(
            SELECT x.user_id, x.account_id, x.k,
                SUM(x.user_points) AS user_points, SUM(x.account_points) AS account_points
            FROM {source} x
            GROUP BY x.user_id, x.account_id, x.k
        )"""
    builder.run(
        f"""
        WITH sums AS (
            SELECT GROUPING(x.account_id) AS of_user, x.user_id, x.account_id, x.k,
                SUM(x.user_points) AS user_points, SUM(x.account_points) AS account_points
            FROM {source} x
            GROUP BY GROUPING SETS ((x.user_id, x.k), (x.account_id, x.k))
        ), users AS (
            INSERT INTO eds_h_user_change (user_id, k, points)
            SELECT user_id, k, user_points FROM sums WHERE of_user = 1
        )
        INSERT INTO eds_h_account_change (account_id, k, points)
        SELECT account_id, k, account_points FROM sums
        WHERE of_user = 0 AND account_id IS NOT NULL
        """,
        extra,
    )


def history_stretches_spread(builder: HistoryBuilder, kind: str, stretches: str) -> None:
    """eds_h_<kind>_day from the stretches in one statement; the days come out subject by
    subject, the order of the history's primary key. A row's entry and exit stretches,
    clipped to the range, are counted off by one generate_series (11 s less than a row per
    stretch over a month of a million users, most stretches being a day or two), in the
    select list: there it hands back one value at a time, where in FROM each call filled a
    tuplestore (8.5 against 14 s for a year of a million users); days are offsets from the
    first, not dates, which generate_series would take through timestamps."""
    column, look = f"{kind}_id", builder.lookback
    entry_days = _clipped_days(builder, "entry_raw", "n", "entry_stop")
    exit_days = _clipped_days(builder, "exit_raw", f"n + {look}", "exit_stop")
    # The users' points are grouped in user and day order (one sort of the rollups) and reach
    # the window functions in that order. Hashed (the planner's pick from its estimate of a
    # few hundred thousand groups for nine million), they spilled to disk and were sorted
    # again (docs/benchmarks.md).
    with builder.hash_aggregation(allowed=False):
        builder.run(
            f"""
            INSERT INTO eds_h_{kind}_day ({column}, day, raw)
            SELECT g.{column}, CAST(%(first)s AS DATE) + CASE WHEN g.k < g.entry_days
                    THEN g.entry_from + g.k ELSE g.exit_from + g.k - g.entry_days END,
                CASE WHEN g.k < g.entry_days THEN g.entry_raw ELSE g.exit_raw END
            FROM (
                SELECT {column}, entry_raw, exit_raw, entry_from, exit_from, entry_days,
                    generate_series(0, entry_days + exit_days - 1) AS k
                FROM (
                    SELECT {column}, entry_raw, exit_raw, GREATEST(n, 0) AS entry_from,
                        GREATEST(n + {look}, 0) AS exit_from,
                        {entry_days} AS entry_days, {exit_days} AS exit_days
                    FROM ({stretches}) c
                ) d
                WHERE entry_days + exit_days > 0
            ) g
            """
        )


def _clipped_days(builder: HistoryBuilder, raw: str, start: str, stop: str) -> str:
    """SQL for how many days of a stretch (day numbers `start` to `stop`, `stop` excluded)
    fall within first..last; 0 when its raw score (`raw`) is not above 0."""
    span = (builder.last - builder.first).days
    return (
        f"CASE WHEN {raw} > 0 THEN "
        f"GREATEST(LEAST({stop}, {span + 1}) - GREATEST({start}, 0), 0) ELSE 0 END"
    )
