"""What a build of more than a week of score history needs (engagement/history_build.py runs
it): each subject's raw score of every day, from one ordered pass over its day totals.

A day's points enter the raw score on their day and leave it `lookback` days later, so a
subject's raw score changes only on such a day: the pass gives the raw score from each change to
the next (a stretch), and each stretch is spread over the days it covers.
"""

# SQL here is assembled from fixed table and column names and dialect snippets; every value is
# a query parameter.
# ruff: noqa: S608

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engagement.history_build import HistoryBuilder


def raw_by_day(builder: HistoryBuilder, kind: str, points: str) -> None:
    """From `points` (a table or an aliased subquery of <kind>_id, day number n and the
    subject's weighted points of that day) to eds_h_<kind>_day: the raw score of every day
    first..last on which it is not zero.

    A day's points count from that day until `lookback` days later, so a subject's raw score
    only changes on a day with points (an entry) or `lookback` days after one (an exit).
    One ordered pass over the points (window functions, every frame over the same order)
    gives, for each entry, the raw score from it to the next change, and the same for its
    exit; each such stretch is then spread over the days it covers.
    """
    out = f"eds_h_{kind}_day"
    builder.temp(out, f"{kind}_id BIGINT, day DATE, raw BIGINT")
    stretches = _stretches_sql(builder, kind, points)
    if not builder.sql.postgres:
        _spread_stretches_by_join(builder, kind, stretches)
    else:
        # The users' points are grouped in user and day order (one sort of the rollups)
        # and reach the window functions in that order. Hashed (the planner's pick from its
        # estimate of a few hundred thousand groups for nine million), they spilled to disk
        # and were sorted again (docs/benchmarks.md).
        with builder.hash_aggregation(allowed=False):
            _spread_stretches_by_series(builder, kind, stretches)
    builder.analyze(out)


def _stretches_sql(builder: HistoryBuilder, kind: str, points: str) -> str:
    """A SELECT of each row of `points` (raw_by_day) as its two stretches: the entry's (from
    day n to entry_stop, exclusive, at entry_raw) and the exit's (from day n + lookback to
    exit_stop, at exit_raw)."""
    column = f"{kind}_id"
    look = builder.lookback
    ordered = f"PARTITION BY {column} ORDER BY n"
    # The entry's window (n-lookback, n] and the exit's (n, n+lookback]; the next entry
    # after the exit is the first of (n+lookback, ...).
    entry = f"({ordered} RANGE BETWEEN {look - 1} PRECEDING AND CURRENT ROW)"
    exit_ = f"({ordered} RANGE BETWEEN 1 FOLLOWING AND {look} FOLLOWING)"
    after_exit = f"({ordered} RANGE BETWEEN {look + 1} FOLLOWING AND UNBOUNDED FOLLOWING)"
    # The raw score changes next at the next entry or at the earliest exit still to come:
    # that of the oldest entry in the window (from an entry), of the next entry (from an
    # exit). An exit on the day of an entry is that entry's stretch (raw 0 here). LEAD looks
    # at the next row of the partition whatever the frame, so it rides on the entry's window:
    # each distinct window is a pass of its own over every point (5 s for 9.4 million).
    return f"""
        SELECT {column}, n,
            CASE WHEN next_n IS NOT NULL AND next_n < oldest_n + {look}
                THEN next_n ELSE oldest_n + {look} END AS entry_stop,
            entry_raw,
            CASE WHEN after_exit_n IS NOT NULL AND after_exit_n < next_n + {look}
                THEN after_exit_n ELSE next_n + {look} END AS exit_stop,
            CASE WHEN last_in_exit = n + {look} THEN 0
                ELSE COALESCE(exit_raw, 0) END AS exit_raw
        FROM (
            SELECT {column}, n,
                LEAD(n) OVER {entry} AS next_n,
                CAST(SUM(points) OVER {entry} AS BIGINT) AS entry_raw,
                FIRST_VALUE(n) OVER {entry} AS oldest_n,
                CAST(SUM(points) OVER {exit_} AS BIGINT) AS exit_raw,
                LAST_VALUE(n) OVER {exit_} AS last_in_exit,
                FIRST_VALUE(n) OVER {after_exit} AS after_exit_n
            FROM {points}
        ) w
    """


def _clipped_days(builder: HistoryBuilder, raw: str, start: str, stop: str) -> str:
    """SQL for how many days of a stretch (day numbers `start` to `stop`, `stop` excluded)
    fall within first..last; 0 when its raw score (`raw`) is not above 0."""
    span = (builder.last - builder.first).days
    return (
        f"CASE WHEN {raw} > 0 THEN "
        f"GREATEST(LEAST({stop}, {span + 1}) - GREATEST({start}, 0), 0) ELSE 0 END"
    )


def _spread_stretches_by_series(builder: HistoryBuilder, kind: str, stretches: str) -> None:
    """PostgreSQL: eds_h_<kind>_day from the stretches."""
    column, look = f"{kind}_id", builder.lookback
    # One statement; the days come out subject by subject, the order of the history's
    # primary key. A row's entry and exit stretches, clipped to the range, are counted
    # off by one generate_series (11 s less than a row per stretch over a month of a
    # million users, most stretches being a day or two), in the select list: there it
    # hands back one value at a time, where in FROM each call filled a tuplestore (8.5
    # against 14 s for a year of a million users); days are offsets from the first, not
    # dates, which generate_series would take through timestamps.
    entry_days = _clipped_days(builder, "entry_raw", "n", "entry_stop")
    exit_days = _clipped_days(builder, "exit_raw", f"n + {look}", "exit_stop")
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


def _spread_stretches_by_join(builder: HistoryBuilder, kind: str, stretches: str) -> None:
    """Portable (SQLite): the stretches into a table eds_h_<kind>_change, then each kind of
    stretch joined to the days it covers (eds_h_day), one statement for the entries and one
    for the exits."""
    column, change = f"{kind}_id", f"eds_h_{kind}_change"
    builder.temp(
        change,
        f"{column} BIGINT, n INTEGER, entry_stop INTEGER, entry_raw BIGINT, "
        "exit_stop INTEGER, exit_raw BIGINT",
    )
    builder.run(f"INSERT INTO {change} {stretches}")
    for start, stop, raw in (
        ("c.n", "entry_stop", "entry_raw"),
        (f"c.n + {builder.lookback}", "exit_stop", "exit_raw"),
    ):
        builder.run(
            f"""
            INSERT INTO eds_h_{kind}_day ({column}, day, raw)
            SELECT c.{column}, d.day, c.{raw} FROM {change} c
            JOIN eds_h_day d ON d.n >= {start} AND d.n < c.{stop}
            WHERE c.{raw} > 0
            """
        )
