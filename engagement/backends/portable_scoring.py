"""The portable (SQLite) statements of the scoring engine and the history build: the same steps
as pg_scoring.py, without bit_or, percentile_cont, grouping sets or generate_series, through
temporary tables and Python where SQLite has no such function. Both give the same results.
"""

# SQL is assembled from fixed table and column names and dialect snippets; every value is a
# query parameter.
# ruff: noqa: S608

from __future__ import annotations

from collections import defaultdict
from datetime import date
from typing import TYPE_CHECKING

from engagement.history_recompute import changes_sum_each
from engagement.scoring.aggregation import rollups_of, subject_of
from engagement.scoring.formula import percentile_90

if TYPE_CHECKING:
    from engagement.history_build import HistoryBuilder
    from engagement.scoring.aggregation import Target, UserIds
    from engagement.scoring.run import ScoringRun, StatementRunner


def subjects_aggregate(run: ScoringRun, target: Target, ids: UserIds | None = None) -> None:
    """Per subject, event and day (eds_t_<name>_day), then per subject and event
    (eds_t_<name>_event), then per subject, with the active days counted from the day table.
    Always the whole scope: `ids` (ranges shared with another connection) is PostgreSQL's."""
    if ids is not None:
        raise ValueError("a range of users is aggregated alongside, on PostgreSQL only")
    key, name, last_at = target.key, target.name, target.tracks_last_at
    _fill_day_table(run, target)
    run.temp(
        f"eds_t_{name}_event",
        f"{key} BIGINT, event_name VARCHAR(255), weight INTEGER, counted BIGINT, n BIGINT, "
        f"previous_counted BIGINT{f', last_at {run.sql.timestamp}' if last_at else ''}",
    )
    # In subject and event order: json_group_array keeps the order rows arrive in, so a
    # subject's breakdown text comes out the same from one refresh to the next.
    run.run(
        f"""
        INSERT INTO eds_t_{name}_event
            ({key}, event_name, weight, counted, n, previous_counted{", last_at" * last_at})
        SELECT {key}, event_name, weight, SUM(cur * counted), SUM(cur * n),
            SUM((1 - cur) * counted){", MAX(CASE WHEN cur = 1 THEN last_at END)" * last_at}
        FROM eds_t_{name}_day GROUP BY {key}, event_name, weight
        ORDER BY {key}, event_name
        """
    )
    adopted, feature_join = "COUNT(CASE WHEN e.weight > 0 AND e.counted > 0 THEN 1 END)", ""
    if run.has_features:
        adopted = "COUNT(DISTINCT CASE WHEN e.n > 0 THEN f.feature END)"
        feature_join = "LEFT JOIN eds_t_feature f ON f.event_name = e.event_name"
    run.run(
        f"""
        INSERT INTO {target.table} ({key}, raw, previous_raw, events, adopted, active_days,
            breakdown{", last_at" * last_at})
        SELECT e.{key}, SUM(e.counted * e.weight), SUM(e.previous_counted * e.weight),
            SUM(e.n), {adopted},
            COALESCE(MAX(d.days), 0), {run.sql.breakdown("e")}{", MAX(e.last_at)" * last_at}
        FROM eds_t_{name}_event e {feature_join}
        LEFT JOIN (
            SELECT {key}, COUNT(DISTINCT day) AS days FROM eds_t_{name}_day
            WHERE cur = 1 AND weight > 0 AND counted > 0 GROUP BY {key}
        ) d ON d.{key} = e.{key}
        GROUP BY e.{key}
        """
    )


def _fill_day_table(run: ScoringRun, target: Target) -> None:
    """eds_t_<name>_day: per subject, event and day of both windows, the events, the counted
    events, the event's weight and whether the day is in the current window."""
    key, subject, last_at = target.key, subject_of(run, target), target.tracks_last_at
    if target.caps_each_rollup:
        counted = f"SUM({run.capped('r.count')})"
    else:
        counted = run.capped("SUM(r.count)")
    run.temp(
        f"eds_t_{target.name}_day",
        f"{key} BIGINT, event_name VARCHAR(255), day DATE, n BIGINT, counted BIGINT, "
        f"weight INTEGER, cur INTEGER{f', last_at {run.sql.timestamp}' if last_at else ''}",
    )
    run.run(
        f"""
        INSERT INTO eds_t_{target.name}_day
            ({key}, event_name, day, n, counted, weight, cur{", last_at" * last_at})
        SELECT {subject}, r.event_name, r.day, SUM(r.count), {counted}, COALESCE(w.weight, 1),
            CASE WHEN r.day >= %(start)s THEN 1 ELSE 0 END{", MAX(r.last_at)" * last_at}
        {rollups_of(run, target, "LEFT JOIN eds_t_weight w ON w.event_name = r.event_name")}
        GROUP BY {subject}, r.event_name, r.day, w.weight
        """
    )


def raw_percentiles(
    run: StatementRunner, table: str, raw: str, previous_raw: str, where: str
) -> tuple[float, float]:
    run.run(f"SELECT {raw}, {previous_raw} FROM {table} WHERE {where}")
    rows = run.cursor.fetchall()
    return (
        percentile_90([row[0] for row in rows if row[0] > 0]),
        percentile_90([row[1] for row in rows if row[1] > 0]),
    )


def history_day_percentiles(builder: StatementRunner) -> None:
    """Each day's raw scores read back and put through percentile_90."""
    raws: dict[date | str, list[float]] = defaultdict(list)
    builder.run("SELECT day, raw FROM eds_h_user_day")
    for day, raw in builder.cursor.fetchall():
        raws[day].append(raw)
    builder.cursor.executemany(
        "INSERT INTO eds_h_p90 (day, p90) VALUES (%s, %s)",
        [(day, percentile_90(values)) for day, values in raws.items()],
    )


def history_changes_sum(
    builder: HistoryBuilder, changes: str, kinds: tuple[str, ...], extra: dict
) -> None:
    """One pass over the rollups for each kind."""
    changes_sum_each(builder, changes, kinds, extra)


def history_stretches_spread(builder: HistoryBuilder, kind: str, stretches: str) -> None:
    """The stretches into a table eds_h_<kind>_change, then each kind of stretch joined to the
    days it covers (eds_h_day), one statement for the entries and one for the exits."""
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
