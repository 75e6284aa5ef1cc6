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
    # Each stretch spread over its days: by generate_series on PostgreSQL, by a join with the
    # days on SQLite (DatabaseBackend.history_stretches_spread).
    builder.backend.history_stretches_spread(builder, kind, _stretches_sql(builder, kind, points))
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
