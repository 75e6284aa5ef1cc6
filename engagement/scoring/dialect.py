"""The SQL expressions of the scoring engine that PostgreSQL and SQLite spell differently.

The formula's expressions are built from the constants of engagement/scoring/formula.py, so the
SQL and the Python functions there agree by construction (and tests run the same cases through
both on each database).
"""

from __future__ import annotations

from collections.abc import Sequence

from engagement.scoring.formula import HALF_UP_DECIMALS, SCORE_MAX, SCORE_MIN_ACTIVE


class Dialect:
    """Expressions for one database vendor ("postgresql" or anything else, read as SQLite)."""

    def __init__(self, vendor: str) -> None:
        self.postgres = vendor == "postgresql"
        self.float = "DOUBLE PRECISION" if self.postgres else "REAL"
        self.empty_json = "'[]'"
        self.timestamp = "TIMESTAMP WITH TIME ZONE" if self.postgres else "TEXT"

    def json_elements(self, column: str) -> str:
        """A table `j` of the elements of a JSON array column, as text in `j.value`."""
        if self.postgres:
            return f"jsonb_array_elements_text({column}) AS j(value)"
        return f"json_each({column}) AS j"

    def json_object_rows(self, param: str) -> str:
        """The rows (tid, id) of a JSON object parameter mapping tracking ids to ids; `param` is
        the parameter's placeholder, never a value."""
        if self.postgres:
            return f"SELECT key AS tid, value::bigint AS id FROM jsonb_each_text({param}::jsonb)"  # noqa: S608
        return f"SELECT key AS tid, value AS id FROM json_each({param})"  # noqa: S608

    def at_most(self, expr: str, cap: int | None) -> str:
        """`expr`, capped at `cap` when there is one."""
        if cap is None:
            return expr
        if self.postgres:
            return f"LEAST({expr}, {int(cap)})"
        return f"(CASE WHEN {expr} > {int(cap)} THEN {int(cap)} ELSE {expr} END)"

    def round_half_up(self, expr: str) -> str:
        """formula.round_half_up: HALF_UP_DECIMALS first, then halves up."""
        scale = f"{10**HALF_UP_DECIMALS}.0"
        nearest = f"ROUND(({expr}) * {scale}) / {scale}"
        # CAST truncates on SQLite, which is floor for the non-negative values used here.
        if self.postgres:
            return f"FLOOR({nearest} + 0.5)"
        return f"CAST({nearest} + 0.5 AS INTEGER)"

    def score(self, raw: str, p90: str) -> str:
        """formula.score_from_raw."""
        # As a float first: PostgreSQL takes 100.0 x an integer raw score as NUMERIC, whose
        # division by the float p90 converts through text (14 s over 21 million history rows).
        scaled = self.round_half_up(f"{SCORE_MAX}.0 * CAST({raw} AS {self.float}) / {p90}")
        return (
            f"(CASE WHEN ({raw}) <= 0 OR {p90} <= 0 THEN 0 WHEN ({raw}) >= {p90} THEN {SCORE_MAX} "
            f"WHEN {scaled} < {SCORE_MIN_ACTIVE} THEN {SCORE_MIN_ACTIVE} ELSE {scaled} END)"
        )

    def differs(self, left: str, right: str) -> str:
        """True when two values differ, NULL differing from any value but NULL."""
        operator = "IS DISTINCT FROM" if self.postgres else "IS NOT"
        return f"{left} {operator} {right}"

    def breakdown(
        self, alias: str, *, arrives_in_name_order: bool = False, quoted_names: str = ""
    ) -> str:
        """BreakdownField's text, [[event, count, weight], ...], in event name order, so that
        a subject's text is the same from one refresh to the next (BreakdownField orders the
        items as served when read). `arrives_in_name_order`: the caller's rows come in that
        order already, and PostgreSQL 15 would still sort each group's rows again.
        `quoted_names` (PostgreSQL): a JSON object of each event name's JSON text
        (ScoringRun.load_quoted_names), looked up instead of escaping the name for every
        subject and event; a name missing from it is escaped as before."""
        where = f"{alias}.weight > 0 AND {alias}.counted > 0"
        if self.postgres:
            # Built as text: several times cheaper than jsonb_build_object, and nothing to parse.
            name = f"to_json({alias}.event_name)::text"
            if quoted_names:
                name = f"COALESCE(CAST({quoted_names} AS JSONB) ->> {alias}.event_name, {name})"
            item = f"'[' || {name} || ',' || {alias}.counted || ',' || {alias}.weight || ']'"
            order = "" if arrives_in_name_order else f" ORDER BY {alias}.event_name"
            return (
                f"'[' || COALESCE(string_agg({item}, ','{order}) FILTER (WHERE {where}), '') || ']'"
            )
        return (
            f"json_group_array(json_array({alias}.event_name, {alias}.counted, {alias}.weight)) "
            f"FILTER (WHERE {where})"
        )

    def created_date(self, traits: str) -> str:
        """formula.created_day: the leading ISO date of createdAt (or created_at), else NULL."""
        if self.postgres:
            text = f"COALESCE({traits} ->> 'createdAt', {traits} ->> 'created_at')"
            return f"(CASE WHEN {text} IS NOT NULL THEN eds_try_date({text}) END)"
        text = (
            f"COALESCE(json_extract({traits}, '$.createdAt'), "
            f"json_extract({traits}, '$.created_at'))"
        )
        # SQLite takes 2024-02-31 as 2 March; only a date that reads back the same counts.
        day = f"substr({text}, 1, 10)"
        return f"(CASE WHEN date(julianday({day})) = {day} THEN {day} END)"

    def days_between(self, later_param: str, earlier: str) -> str:
        if self.postgres:
            return f"(CAST({later_param} AS DATE) - CAST({earlier} AS DATE))"
        return f"CAST(julianday({later_param}) - julianday(date({earlier})) AS INTEGER)"

    def tenure(self, today_param: str, started: str) -> str:
        """formula.tenure_days, given the start (created date, else first seen) as `started`."""
        days = self.days_between(today_param, started)
        return f"(CASE WHEN {started} IS NULL THEN NULL WHEN {days} < 0 THEN 0 ELSE {days} END)"

    def row_differs(self, table: str, other: str, columns: Sequence[str]) -> str:
        """True when any of the columns differs between two rows, NULLs comparing equal."""
        return self.values_differ(
            [f"{table}.{c}" for c in columns], [f"{other}.{c}" for c in columns]
        )

    def values_differ(self, old: Sequence[str], new: Sequence[str]) -> str:
        """True when any expression of `old` differs from its peer in `new`, NULLs equal."""
        operator = "IS DISTINCT FROM" if self.postgres else "IS NOT"
        return f"({', '.join(old)}) {operator} ({', '.join(new)})"

    def changed_guard(self, table: str, columns: Sequence[str]) -> str:
        """Skip rewriting rows whose values are unchanged (PostgreSQL only; SQLite rewrites)."""
        if not self.postgres:
            return ""
        old = ", ".join(f"{table}.{c}" for c in columns)
        new = ", ".join(f"excluded.{c}" for c in columns)
        return f"WHERE ({old}) IS DISTINCT FROM ({new})"
