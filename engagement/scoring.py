"""The scoring engine: fills UserScore and AccountScore of a workspace from the daily rollups.

The formula (design.md "Scoring"): a user's raw score is the sum over events in the lookback window
of weight(event), counting at most `daily_event_cap` of one event per user per day. The score is 0
when raw is 0, else max(1, round_half_up(100 * min(raw / p90, 1))), p90 being the 90th percentile
(linear interpolation between closest ranks) of the workspace's non-zero raw scores. An account
scores the mean of the scores of all users linked to it. The previous window (one lookback period
earlier) is scored the same way and score_change is the difference.

Everything is set-based SQL over EventRollup (never the raw Event rows) with temporary tables, so a
refresh stays bounded at a million users. The same statements run on PostgreSQL and on SQLite (the
embedded mode); `_Dialect` holds the few expressions that differ.

Two ways in:
- a full rescore computes every user and account in scope (first run, new day, changed settings);
- an incremental refresh recomputes only users and accounts whose rollups, traits or links changed
  since the workspace's watermark, then re-normalises (p90, scores, percentile ranks), writing only
  rows whose values changed.
Both end with `segments_refresh`.
"""

# SQL here is assembled from fixed table and column names and dialect snippets; every value is
# a query parameter.
# ruff: noqa: S608

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from engagement.models import Account, EventWeight, ScoringState, Workspace
from engagement.segments import accounts_admitted, segments_refresh

logger = logging.getLogger(__name__)

_TEMP_TABLES = (
    "eds_t_weight",
    "eds_t_match_account",
    "eds_t_candidate_user",
    "eds_t_candidate_account",
    "eds_t_scope_user",
    "eds_t_scope_account",
    "eds_t_user_day",
    "eds_t_user_event",
    "eds_t_user",
    "eds_t_account_day",
    "eds_t_account_event",
    "eds_t_account",
    "eds_t_account_members",
    "eds_t_rescored",
    "eds_t_rank",
)


@dataclass(frozen=True, slots=True)
class ScoringWindow:
    """Inclusive UTC days: the lookback window ending today and the one before it."""

    start: date
    end: date
    previous_start: date
    previous_end: date


@dataclass(frozen=True, slots=True)
class RefreshResult:
    workspace_id: int
    mode: str  # "full", "incremental", "idle" (nothing changed) or "busy" (another refresh runs)
    users: int = 0  # users recomputed
    accounts: int = 0  # accounts recomputed
    duration_ms: int = 0


def scoring_window(*, lookback_days: int, today: date) -> ScoringWindow:
    """The window is the `lookback_days` most recent UTC days, today included."""
    start = today - timedelta(days=lookback_days - 1)
    previous_end = start - timedelta(days=1)
    return ScoringWindow(
        start=start,
        end=today,
        previous_start=previous_end - timedelta(days=lookback_days - 1),
        previous_end=previous_end,
    )


def percentile_90(values: Sequence[float]) -> float:
    """90th percentile by linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = 0.9 * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# Scores round half up on the value rounded to this many decimals first: floating point puts an
# exact half a hair below (100 * 23 / 36.800000000000004 = 62.49999999999999), and this rounds it
# back, far below the smallest gap between a real ratio of whole raw scores and a half.
# The SQL (_Dialect.round_half_up) applies the same rule.
HALF_UP_DECIMALS = 9


def round_half_up(value: float) -> int:
    """Nearest integer, halves up, after rounding to HALF_UP_DECIMALS decimals."""
    scale = 10**HALF_UP_DECIMALS
    return math.floor(round(value * scale) / scale + 0.5)


def score_from_raw(*, raw: float, p90: float) -> int:
    """The normalisation of design.md, rounding halves up (the SQL does the same)."""
    if raw <= 0 or p90 <= 0:
        return 0
    if raw >= p90:
        return 100
    return max(1, round_half_up(100.0 * raw / p90))


def workspace_config_digest(*, workspace: Workspace) -> str:
    """What a full rescore depends on besides the data: a change means rescore everything."""
    weights = sorted(
        EventWeight.objects.filter(workspace=workspace).values_list("event_name", "weight")
    )
    config = {
        "lookback_days": workspace.lookback_days,
        "daily_event_cap": workspace.daily_event_cap,
        "account_filter": workspace.account_filter or {},
        "weights": weights,
    }
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def workspace_rescore(*, workspace_id: int, now: datetime | None = None) -> RefreshResult:
    """Recompute every score of the workspace (settings changed, new day, first run)."""
    return workspace_refresh(workspace_id=workspace_id, now=now, force_full=True)


def workspace_refresh(
    *, workspace_id: int, now: datetime | None = None, force_full: bool = False
) -> RefreshResult:
    """Bring a workspace's scores up to date: incrementally when possible, else in full.

    Runs in one transaction holding the workspace's ScoringState row, so two workers never
    refresh the same workspace at once (the second one returns "busy" at once).
    """
    now = now or timezone.now()
    started = time.monotonic()
    ScoringState.objects.get_or_create(workspace_id=workspace_id)
    with transaction.atomic():
        state = (
            ScoringState.objects.select_for_update(skip_locked=True)
            .filter(workspace_id=workspace_id)
            .first()
        )
        if state is None:
            return RefreshResult(workspace_id=workspace_id, mode="busy")
        workspace = Workspace.objects.get(id=workspace_id)
        digest = workspace_config_digest(workspace=workspace)
        today = now.astimezone(UTC).date()
        since = _changes_since(state)
        full = (
            force_full
            or since is None
            or not _activity_kept_since(since, now)
            or state.window_end != today
            or state.config_digest != digest
        )
        engine = _Engine(workspace=workspace, state=state, now=now, today=today)
        try:
            if full:
                users, accounts = engine.full()
                mode = "full"
            else:
                changed = engine.incremental(since=since)
                if changed is None:
                    # Nothing changed up to `now`: the watermark moves on all the same.
                    state.scored_through = now
                    state.save(update_fields=["scored_through"])
                    return RefreshResult(workspace_id=workspace_id, mode="idle")
                users, accounts = changed
                mode = "incremental"
        finally:
            engine.drop_temp_tables()
        segments_refresh(workspace_id=workspace_id, now=now)
        duration_ms = int((time.monotonic() - started) * 1000)
        state.scored_through = now
        state.window_end = today
        state.refreshed_at = now
        state.last_refresh_ms = duration_ms
        if full:
            state.config_digest = digest
            state.full_rescored_at = now
            state.last_full_rescore_ms = duration_ms
        state.save()
    logger.info(
        "scores %s workspace=%s users=%s accounts=%s in %s ms",
        mode,
        workspace_id,
        users,
        accounts,
        duration_ms,
    )
    return RefreshResult(
        workspace_id=workspace_id,
        mode=mode,
        users=users,
        accounts=accounts,
        duration_ms=duration_ms,
    )


def _changes_since(state: ScoringState) -> datetime | None:
    """From when a refresh re-reads changes: the watermark less the overlap that catches
    transactions committed late; None for a workspace never scored."""
    if state.scored_through is None:
        return None
    return state.scored_through - timedelta(seconds=settings.SCORING_WATERMARK_OVERLAP_SECONDS)


def _activity_kept_since(since: datetime, now: datetime, *, margin: float = 1.0) -> bool:
    """Whether EventActivity still holds every batch applied after `since` (older rows are
    purged; with a margin below 1, whether it will for a while yet): if not, only a full
    rescore is sure to see every change."""
    keep = timedelta(minutes=settings.SCORING_ACTIVITY_KEEP_MINUTES) * margin
    return since >= now - keep


def workspace_refresh_is_due(*, workspace: Workspace, now: datetime | None = None) -> bool:
    """Cheap check (indexed EXISTS queries): would a refresh have anything to do?"""
    now = now or timezone.now()
    state = ScoringState.objects.filter(workspace_id=workspace.id).first()
    if state is None or state.scored_through is None:
        return True
    if state.window_end != now.astimezone(UTC).date():
        return True
    if state.config_digest != workspace_config_digest(workspace=workspace):
        return True
    since = _changes_since(state)
    if not _activity_kept_since(since, now, margin=0.5):
        return True  # an idle refresh moves the watermark on before the activity it needs goes
    params = {"product": workspace.product_id, "since": _dt(since)}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT 1 WHERE EXISTS (
                SELECT 1 FROM engagement_eventactivity
                WHERE product_id = %(product)s AND applied_at > %(since)s)
            OR EXISTS (
                SELECT 1 FROM engagement_user
                WHERE product_id = %(product)s AND updated_at > %(since)s)
            OR EXISTS (
                SELECT 1 FROM engagement_account
                WHERE product_id = %(product)s AND updated_at > %(since)s)
            OR EXISTS (
                SELECT 1 FROM engagement_membership m
                JOIN engagement_user u ON u.id = m.user_id
                WHERE m.created_at > %(since)s AND u.product_id = %(product)s)
            """,
            params,
        )
        return cursor.fetchone() is not None


def _dt(value: datetime) -> object:
    return connection.ops.adapt_datetimefield_value(value)


def _d(value: date) -> object:
    return connection.ops.adapt_datefield_value(value)


class _Dialect:
    """The expressions that PostgreSQL and SQLite spell differently."""

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

    def round_half_up(self, expr: str) -> str:
        """The SQL of the module's round_half_up (HALF_UP_DECIMALS first, then halves up)."""
        scale = f"{10**HALF_UP_DECIMALS}.0"
        nearest = f"ROUND(({expr}) * {scale}) / {scale}"
        # CAST truncates on SQLite, which is floor for the non-negative values used here.
        if self.postgres:
            return f"FLOOR({nearest} + 0.5)"
        return f"CAST({nearest} + 0.5 AS INTEGER)"

    def score(self, raw: str, p90: str) -> str:
        scaled = self.round_half_up(f"100.0 * ({raw}) / {p90}")
        return (
            f"(CASE WHEN ({raw}) <= 0 OR {p90} <= 0 THEN 0 WHEN ({raw}) >= {p90} THEN 100 "
            f"WHEN {scaled} < 1 THEN 1 ELSE {scaled} END)"
        )

    def breakdown(self, alias: str) -> str:
        """BreakdownField's text, [[event, count, weight], ...], biggest points first."""
        points = f"{alias}.counted * {alias}.weight"
        where = f"{alias}.weight > 0 AND {alias}.counted > 0"
        if self.postgres:
            # Built as text: several times cheaper than jsonb_build_object, and nothing to parse.
            item = (
                f"'[' || to_json({alias}.event_name)::text || ',' || {alias}.counted || ',' || "
                f"{alias}.weight || ']'"
            )
            return (
                f"'[' || COALESCE(string_agg({item}, ',' ORDER BY {points} DESC, "
                f"{alias}.event_name) FILTER (WHERE {where}), '') || ']'"
            )
        return (
            f"json_group_array(json_array({alias}.event_name, {alias}.counted, {alias}.weight)) "
            f"FILTER (WHERE {where})"
        )

    def created_date(self, traits: str) -> str:
        """The createdAt (or created_at) trait as a date, NULL when absent or not a date."""
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
        days = self.days_between(today_param, started)
        return f"(CASE WHEN {started} IS NULL THEN NULL WHEN {days} < 0 THEN 0 ELSE {days} END)"

    def rank_value(self, expr: str) -> str:
        return f"CAST(ROUND(CAST({expr} AS NUMERIC), 1) AS {self.float})"

    def row_differs(self, table: str, other: str, columns: Sequence[str]) -> str:
        """True when any of the columns differs between two rows, NULLs comparing equal."""
        old = ", ".join(f"{table}.{c}" for c in columns)
        new = ", ".join(f"{other}.{c}" for c in columns)
        operator = "IS DISTINCT FROM" if self.postgres else "IS NOT"
        return f"({old}) {operator} ({new})"

    def changed_guard(self, table: str, columns: Sequence[str]) -> str:
        """Skip rewriting rows whose values are unchanged (PostgreSQL only; SQLite rewrites)."""
        if not self.postgres:
            return ""
        old = ", ".join(f"{table}.{c}" for c in columns)
        new = ", ".join(f"excluded.{c}" for c in columns)
        return f"WHERE ({old}) IS DISTINCT FROM ({new})"


_USER_VALUE_COLUMNS = (
    "engagement_score",
    "score_change",
    "raw_score",
    "active_days",
    "events_in_window",
    "adoption",
    "last_seen",
    "score_breakdown",
    "previous_raw_score",
    "previous_score",
    "tenure_days",
)
_ACCOUNT_VALUE_COLUMNS = (
    *_USER_VALUE_COLUMNS,
    "active_users",
    "total_users",
    "active_user_share",
)


class _Engine:
    """One refresh of one workspace, inside the caller's transaction."""

    def __init__(
        self, *, workspace: Workspace, state: ScoringState, now: datetime, today: date
    ) -> None:
        self.workspace = workspace
        self.state = state
        self.sql = _Dialect(connection.vendor)
        self.window = scoring_window(lookback_days=workspace.lookback_days, today=today)
        self.cap = workspace.daily_event_cap
        self.filtered = bool(workspace.account_filter)
        self.params = {
            "ws": workspace.id,
            "product": workspace.product_id,
            "start": _d(self.window.start),
            "end": _d(self.window.end),
            "prev_start": _d(self.window.previous_start),
            "prev_end": _d(self.window.previous_end),
            "today": _d(today),
            "now": _dt(now),
        }
        self.cursor = connection.cursor()
        self.is_full = False
        self.everyone = False  # full rescore without an account filter: no scope tables
        if self.sql.postgres:
            # Aggregations over millions of rollups stay in memory instead of spilling to disk.
            # Rollups are read in user order (the unique index leads with user_id) and grouped
            # as they stream: far cheaper than hashing millions of groups, which the planner
            # picks from poor estimates. JIT compiling these statements costs more than it saves.
            for setting in (
                f"work_mem = '{int(settings.SCORING_WORK_MEM_MB)}MB'",
                "enable_hashagg = off",
                "max_parallel_workers_per_gather = 0",
                "jit = off",
            ):
                self.cursor.execute(f"SET LOCAL {setting}")

    # --- plumbing -------------------------------------------------------------------------

    def run(self, sql: str, extra: dict | None = None) -> int:
        params = {**self.params, **(extra or {})}
        self.cursor.execute(sql, params)
        return self.cursor.rowcount

    def scalar(self, sql: str, extra: dict | None = None) -> object:
        self.run(sql, extra)
        row = self.cursor.fetchone()
        return row[0] if row else None

    def temp(self, name: str, columns: str) -> None:
        self.cursor.execute(f"DROP TABLE IF EXISTS {name}")
        self.cursor.execute(f"CREATE TEMPORARY TABLE {name} ({columns})")

    def analyze(self, *names: str) -> None:
        # Fresh temp tables have no statistics; the planner needs them to pick index lookups
        # for a handful of changed users and hash joins for a million.
        if self.sql.postgres:
            for name in names:
                self.cursor.execute(f"ANALYZE {name}")

    def drop_temp_tables(self) -> None:
        for name in _TEMP_TABLES:
            self.cursor.execute(f"DROP TABLE IF EXISTS {name}")
        self.cursor.close()

    def count(self, table: str) -> int:
        return int(self.scalar(f"SELECT COUNT(*) FROM {table}") or 0)

    def weight_of(self, event_name: str) -> str:
        """The workspace's weight of an event name (1 when unlisted), on PostgreSQL.

        A lookup in a JSON object bound once per statement rather than a join: a hash join
        with the weights would lose the user order the rollups stream in, and the planner
        would then sort millions of rows again before the per-user aggregation. The subquery
        that computes it ends in OFFSET 0 so that it is computed once per row, not once for
        every reference to it in the outer aggregates.
        """
        return f"COALESCE(CAST(CAST(%(weights)s AS JSONB) ->> {event_name} AS INTEGER), 1)"

    def capped(self, expr: str) -> str:
        if self.cap is None:
            return expr
        return f"(CASE WHEN {expr} > {int(self.cap)} THEN {int(self.cap)} ELSE {expr} END)"

    # --- setup ------------------------------------------------------------------------------

    def load_weights(self) -> None:
        self.temp("eds_t_weight", "event_name VARCHAR(255) PRIMARY KEY, weight INTEGER NOT NULL")
        weights = list(self.workspace.weights.values_list("event_name", "weight"))
        self.cursor.executemany(
            "INSERT INTO eds_t_weight (event_name, weight) VALUES (%s, %s)", weights
        )
        self.params["weights"] = json.dumps(dict(weights))
        # Adoption is a share of the workspace's weighted names: every name the product sent
        # that is not excluded (unlisted names weigh 1).
        self.weighted_names = int(
            self.scalar(
                """
                SELECT COUNT(*) FROM engagement_eventname n
                LEFT JOIN eds_t_weight w ON w.event_name = n.name
                WHERE n.product_id = %(product)s AND COALESCE(w.weight, 1) > 0
                """
            )
            or 0
        )

    def load_matching_accounts(self) -> None:
        """Accounts the workspace's account filter admits (only built when a filter is set)."""
        self.temp("eds_t_match_account", "account_id BIGINT PRIMARY KEY")
        queryset = accounts_admitted(
            Account.objects.filter(product_id=self.workspace.product_id),
            self.workspace.account_filter,
        )
        sql, params = queryset.values("id").query.sql_with_params()
        self.cursor.execute(f"INSERT INTO eds_t_match_account (account_id) {sql}", params)
        self.analyze("eds_t_match_account")

    # --- the two entry points ----------------------------------------------------------------

    def full(self) -> tuple[int, int]:
        self.is_full = True
        self.everyone = not self.filtered
        self.load_weights()
        if self.filtered:
            self.load_matching_accounts()
            self.temp("eds_t_scope_user", "user_id BIGINT PRIMARY KEY")
            self.temp("eds_t_scope_account", "account_id BIGINT PRIMARY KEY")
            self.run(
                """
                INSERT INTO eds_t_scope_user (user_id)
                SELECT DISTINCT m.user_id FROM engagement_membership m
                JOIN eds_t_match_account a ON a.account_id = m.account_id
                """
            )
            self.run("INSERT INTO eds_t_scope_account SELECT account_id FROM eds_t_match_account")
            self.analyze("eds_t_scope_user", "eds_t_scope_account")
        self.aggregate_users()
        # Everyone in scope is here, so p90 comes straight from this run's raw scores.
        self.state.p90, self.state.previous_p90 = self.percentiles(
            "eds_t_user", "raw", "previous_raw"
        )
        self.write_users()
        if self.filtered:
            self.delete_out_of_scope("user")
            self.update_ranks("engagement_userscore")
        self.aggregate_accounts()
        self.write_accounts()
        if self.filtered:
            self.delete_out_of_scope("account")
            self.update_ranks("engagement_accountscore")
        users = self.scalar("SELECT COUNT(*) FROM engagement_userscore WHERE workspace_id = %(ws)s")
        accounts = self.scalar(
            "SELECT COUNT(*) FROM engagement_accountscore WHERE workspace_id = %(ws)s"
        )
        return int(users or 0), int(accounts or 0)

    def incremental(self, *, since: datetime) -> tuple[int, int] | None:
        """Recompute what changed since `since`; None when nothing did."""
        extra = {"since": _dt(since)}
        self.temp("eds_t_candidate_user", "user_id BIGINT PRIMARY KEY")
        self.temp("eds_t_candidate_account", "account_id BIGINT PRIMARY KEY")
        self.run(
            f"""
            INSERT INTO eds_t_candidate_user (user_id)
            SELECT CAST(j.value AS BIGINT)
                FROM engagement_eventactivity x, {self.sql.json_elements("x.user_ids")}
                WHERE x.product_id = %(product)s AND x.applied_at > %(since)s
            UNION SELECT id FROM engagement_user
                WHERE product_id = %(product)s AND updated_at > %(since)s
            UNION SELECT m.user_id FROM engagement_membership m
                JOIN engagement_user u ON u.id = m.user_id
                WHERE m.created_at > %(since)s AND u.product_id = %(product)s
            """,
            extra,
        )
        self.run(
            f"""
            INSERT INTO eds_t_candidate_account (account_id)
            SELECT CAST(j.value AS BIGINT)
                FROM engagement_eventactivity x, {self.sql.json_elements("x.account_ids")}
                WHERE x.product_id = %(product)s AND x.applied_at > %(since)s
            UNION SELECT id FROM engagement_account
                WHERE product_id = %(product)s AND updated_at > %(since)s
            UNION SELECT m.account_id FROM engagement_membership m
                JOIN engagement_user u ON u.id = m.user_id
                WHERE m.created_at > %(since)s AND u.product_id = %(product)s
            """,
            extra,
        )
        if not self.count("eds_t_candidate_user") and not self.count("eds_t_candidate_account"):
            return None
        self.load_weights()
        if self.filtered:
            self.load_matching_accounts()
            # An account entering or leaving the filter brings its users in or out of scope.
            self.run(
                """
                INSERT INTO eds_t_candidate_user (user_id)
                SELECT DISTINCT m.user_id FROM engagement_membership m
                JOIN eds_t_candidate_account c ON c.account_id = m.account_id
                WHERE NOT EXISTS (
                    SELECT 1 FROM eds_t_candidate_user x WHERE x.user_id = m.user_id)
                """
            )
        self.analyze("eds_t_candidate_user", "eds_t_candidate_account")

        self.temp("eds_t_scope_user", "user_id BIGINT PRIMARY KEY")
        in_scope = (
            """
            WHERE EXISTS (SELECT 1 FROM engagement_membership m
                JOIN eds_t_match_account a ON a.account_id = m.account_id
                WHERE m.user_id = c.user_id)
            """
            if self.filtered
            else ""
        )
        self.run(
            f"INSERT INTO eds_t_scope_user (user_id) "
            f"SELECT c.user_id FROM eds_t_candidate_user c {in_scope}"
        )
        self.analyze("eds_t_scope_user")
        self.delete_out_of_scope("user", among_candidates=True)
        self.aggregate_users()
        self.write_users()
        self.renormalise_users()
        self.update_ranks("engagement_userscore")

        # Accounts: those that changed, and those of users whose values changed.
        self.run(
            """
            INSERT INTO eds_t_candidate_account (account_id)
            SELECT DISTINCT linked.account_id FROM (
                SELECT m.account_id FROM engagement_membership m
                JOIN eds_t_candidate_user c ON c.user_id = m.user_id
                UNION
                SELECT m.account_id FROM engagement_membership m
                JOIN eds_t_rescored r ON r.user_id = m.user_id
            ) linked
            WHERE NOT EXISTS (
                SELECT 1 FROM eds_t_candidate_account x WHERE x.account_id = linked.account_id)
            """
        )
        self.temp("eds_t_scope_account", "account_id BIGINT PRIMARY KEY")
        account_in_scope = (
            "WHERE c.account_id IN (SELECT account_id FROM eds_t_match_account)"
            if self.filtered
            else ""
        )
        self.run(
            f"INSERT INTO eds_t_scope_account (account_id) "
            f"SELECT c.account_id FROM eds_t_candidate_account c {account_in_scope}"
        )
        self.analyze("eds_t_scope_account")
        self.delete_out_of_scope("account", among_candidates=True)
        self.aggregate_accounts()
        self.write_accounts()
        self.update_ranks("engagement_accountscore")
        return self.count("eds_t_scope_user"), self.count("eds_t_scope_account")

    def delete_out_of_scope(self, kind: str, *, among_candidates: bool = False) -> None:
        """Drop the score rows of users (or accounts) no longer in the workspace's scope: all
        of them after a full rescore, only changed ones after an incremental refresh."""
        table, column = f"engagement_{kind}score", f"{kind}_id"
        candidates = (
            f"AND {column} IN (SELECT {column} FROM eds_t_candidate_{kind})"
            if among_candidates
            else ""
        )
        self.run(
            f"""
            DELETE FROM {table} WHERE workspace_id = %(ws)s {candidates}
            AND NOT EXISTS (SELECT 1 FROM eds_t_scope_{kind} s WHERE s.{column} = {table}.{column})
            """
        )

    # --- users ------------------------------------------------------------------------------

    def aggregate_users(self) -> None:
        """Per scoped user: raw now and one period earlier, events, names used, days, breakdown."""
        f = self.sql.float
        self.temp(
            "eds_t_user",
            f"user_id BIGINT PRIMARY KEY, raw {f}, previous_raw {f}, events BIGINT, "
            f"names_used INTEGER, active_days INTEGER, breakdown TEXT",
        )
        if self.sql.postgres:
            self._aggregate_users_postgres()
        else:
            self._aggregate_users_portable()
        self.analyze("eds_t_user")

    def _rollup_scope(self, table: str, column: str) -> str:
        return "" if self.everyone else f"JOIN {table} s ON s.{column} = r.{column}"

    def _aggregate_users_postgres(self) -> None:
        """One pass over the rollups; the active days of each event travel as a bit mask."""
        scope = self._rollup_scope("eds_t_scope_user", "user_id")
        if self.cap is None:
            days = f"""
                SELECT r.user_id, r.event_name, r.day, r.count AS n, r.count AS counted
                FROM engagement_eventrollup r {scope}
                WHERE r.product_id = %(product)s AND r.day >= %(prev_start)s
                AND r.day <= %(end)s
            """
        else:
            # The cap applies per user, event and day, whichever accounts the events went to.
            days = f"""
                SELECT r.user_id, r.event_name, r.day, SUM(r.count) AS n,
                    LEAST(SUM(r.count), {int(self.cap)}) AS counted
                FROM engagement_eventrollup r {scope}
                WHERE r.product_id = %(product)s AND r.day >= %(prev_start)s
                AND r.day <= %(end)s
                GROUP BY r.user_id, r.event_name, r.day
            """
        self.run(
            f"""
            INSERT INTO eds_t_user
                (user_id, raw, previous_raw, events, names_used, active_days, breakdown)
            SELECT e.user_id, SUM(e.counted * e.weight), SUM(e.previous_counted * e.weight),
                SUM(e.n), COUNT(*) FILTER (WHERE e.weight > 0 AND e.counted > 0),
                COALESCE(bit_count(CAST(bit_or(e.days) FILTER (WHERE e.weight > 0)
                    AS BIT(64))), 0),
                {self.sql.breakdown("e")}
            FROM (
                SELECT ue.*, {self.weight_of("ue.event_name")} AS weight FROM (
                    SELECT d.user_id, d.event_name,
                        COALESCE(SUM(d.counted) FILTER (WHERE d.day >= %(start)s), 0) AS counted,
                        COALESCE(SUM(d.n) FILTER (WHERE d.day >= %(start)s), 0) AS n,
                        COALESCE(SUM(d.counted) FILTER (WHERE d.day < %(start)s), 0)
                            AS previous_counted,
                        bit_or(CAST(1 AS BIGINT) << (d.day - %(prev_start)s))
                            FILTER (WHERE d.day >= %(start)s) AS days
                    FROM ({days}) d
                    GROUP BY d.user_id, d.event_name
                ) ue OFFSET 0
            ) e
            GROUP BY e.user_id
            """
        )

    def _aggregate_users_portable(self) -> None:
        """The same through day-level temporary tables (SQLite has no bit_or)."""
        self.temp(
            "eds_t_user_day",
            "user_id BIGINT, event_name VARCHAR(255), day DATE, n BIGINT, counted BIGINT, "
            "weight INTEGER, cur INTEGER",
        )
        self.run(
            f"""
            INSERT INTO eds_t_user_day (user_id, event_name, day, n, counted, weight, cur)
            SELECT r.user_id, r.event_name, r.day, SUM(r.count), {self.capped("SUM(r.count)")},
                COALESCE(w.weight, 1), CASE WHEN r.day >= %(start)s THEN 1 ELSE 0 END
            FROM engagement_eventrollup r
            {self._rollup_scope("eds_t_scope_user", "user_id")}
            LEFT JOIN eds_t_weight w ON w.event_name = r.event_name
            WHERE r.product_id = %(product)s AND r.day >= %(prev_start)s AND r.day <= %(end)s
            GROUP BY r.user_id, r.event_name, r.day, w.weight
            """
        )
        self.temp(
            "eds_t_user_event",
            "user_id BIGINT, event_name VARCHAR(255), weight INTEGER, counted BIGINT, n BIGINT, "
            "previous_counted BIGINT",
        )
        self.run(
            """
            INSERT INTO eds_t_user_event
                (user_id, event_name, weight, counted, n, previous_counted)
            SELECT user_id, event_name, weight, SUM(cur * counted), SUM(cur * n),
                SUM((1 - cur) * counted)
            FROM eds_t_user_day GROUP BY user_id, event_name, weight
            ORDER BY user_id, SUM(cur * counted) * weight DESC, event_name
            """
        )
        self.run(
            f"""
            INSERT INTO eds_t_user
                (user_id, raw, previous_raw, events, names_used, active_days, breakdown)
            SELECT e.user_id, SUM(e.counted * e.weight), SUM(e.previous_counted * e.weight),
                SUM(e.n), COUNT(CASE WHEN e.weight > 0 AND e.counted > 0 THEN 1 END),
                COALESCE(MAX(d.days), 0), {self.sql.breakdown("e")}
            FROM eds_t_user_event e
            LEFT JOIN (
                SELECT user_id, COUNT(DISTINCT day) AS days FROM eds_t_user_day
                WHERE cur = 1 AND weight > 0 AND counted > 0 GROUP BY user_id
            ) d ON d.user_id = e.user_id
            GROUP BY e.user_id
            """
        )

    def write_users(self) -> None:
        """Upsert the scoped users with the current p90; renormalise_users fixes a moved p90.

        A full rescore also sets every percentile rank here (it sees the whole workspace).
        """
        sql = self.sql
        score = sql.score("COALESCE(u.raw, 0)", "%(p90)s")
        previous = sql.score("COALESCE(u.previous_raw, 0)", "%(previous_p90)s")
        adoption = (
            f"CAST(COALESCE(u.names_used, 0) AS {sql.float}) / %(names)s"
            if self.weighted_names
            else "0"
        )
        started = f"COALESCE({sql.created_date('usr.traits')}, usr.first_seen_at)"
        # An incremental refresh leaves ranks to update_ranks; a full rescore writes them here.
        columns = [*_USER_VALUE_COLUMNS, *(["percentile_rank"] if self.is_full else [])]
        extra = {
            "p90": self.state.p90,
            "previous_p90": self.state.previous_p90,
            "names": float(self.weighted_names or 1),
        }
        scope, in_scope, population = self.in_scope("user")
        rank, rank_join = "0", ""
        if self.is_full:
            rank, rank_join = self.ranks(
                scored="eds_t_user u",
                score=sql.score("u.raw", "%(p90)s"),
                population=population,
                score_of_row=score,
                extra=extra,
            )
        inserted = [*_USER_VALUE_COLUMNS, "percentile_rank"]
        values = f"""
            SELECT usr.id AS user_id, {score} AS engagement_score,
                {score} - {previous} AS score_change, COALESCE(u.raw, 0) AS raw_score,
                COALESCE(u.active_days, 0) AS active_days, COALESCE(u.events, 0)
                AS events_in_window, {adoption} AS adoption, usr.last_seen_at AS last_seen,
                COALESCE(u.breakdown, {sql.empty_json}) AS score_breakdown,
                COALESCE(u.previous_raw, 0) AS previous_raw_score, {previous} AS previous_score,
                {sql.tenure("%(today)s", started)} AS tenure_days, {rank} AS percentile_rank
            FROM {scope}
            LEFT JOIN eds_t_user u ON u.user_id = usr.id
            {rank_join}
            WHERE {in_scope}
        """
        insert = f"""
            INSERT INTO engagement_userscore (workspace_id, user_id, computed_at,
                {", ".join(inserted)})
            SELECT %(ws)s, n.user_id, %(now)s, {", ".join(f"n.{c}" for c in inserted)}
            FROM ({values}) n
        """
        if not self.is_full:
            # A handful of changed users: one upsert.
            updates = ", ".join(f"{c} = excluded.{c}" for c in columns)
            self.run(
                f"""
                {insert} WHERE 1 = 1
                ON CONFLICT (workspace_id, user_id) DO UPDATE SET {updates},
                    computed_at = excluded.computed_at
                {sql.changed_guard("engagement_userscore", columns)}
                """,
                extra,
            )
            return
        # A million users: an upsert would lock (and so rewrite) every existing row even when
        # nothing changed, and checks each new row against the unique index twice. Instead:
        # a plain insert into an empty workspace, else an update of the rows whose values
        # changed and an insert of the users not scored yet.
        has_rows = self.scalar(
            "SELECT 1 FROM engagement_userscore WHERE workspace_id = %(ws)s LIMIT 1"
        )
        if has_rows:
            updates = ", ".join(f"{c} = n.{c}" for c in columns)
            self.run(
                f"""
                UPDATE engagement_userscore SET {updates}, computed_at = %(now)s
                FROM ({values}) n
                WHERE engagement_userscore.workspace_id = %(ws)s
                AND engagement_userscore.user_id = n.user_id
                AND {sql.row_differs("engagement_userscore", "n", columns)}
                """,
                extra,
            )
            insert += """
                WHERE NOT EXISTS (SELECT 1 FROM engagement_userscore x
                    WHERE x.workspace_id = %(ws)s AND x.user_id = n.user_id)
            """
        self.run(insert, extra)

    def in_scope(self, kind: str) -> tuple[str, str, str]:
        """FROM clause (aliased `usr` or `acc`), WHERE condition and COUNT query of the users or
        accounts a full rescore writes: all of the product's, or those of the scope table."""
        table, alias = (
            ("engagement_user", "usr") if kind == "user" else ("engagement_account", "acc")
        )
        if self.everyone:
            return (
                f"{table} {alias}",
                f"{alias}.product_id = %(product)s",
                f"SELECT COUNT(*) FROM {table} WHERE product_id = %(product)s",
            )
        scope = f"eds_t_scope_{kind}"
        return (
            f"{scope} s JOIN {table} {alias} ON {alias}.id = s.{kind}_id",
            "1 = 1",
            f"SELECT COUNT(*) FROM {scope}",
        )

    def ranks(
        self, *, scored: str, score: str, population: str, score_of_row: str, extra: dict
    ) -> tuple[str, str]:
        """The percentile rank of every score a full rescore is about to write, as the column
        expression and the join that bring it to a row whose score is `score_of_row`.

        A rank depends only on the score and the workspace's score histogram (100 x rows
        scoring lower / (rows - 1)), so it comes from a histogram of at most 101 rows (eds_t_rank)
        instead of a window over a million wide rows. `scored` holds the rows with a computed
        score; the rest of the `population` (a COUNT query) score 0.
        """
        self.temp("eds_t_rank", f"score {self.sql.float} PRIMARY KEY, pr {self.sql.float}")
        denominator = "(CASE WHEN SUM(c) OVER () > 1 THEN SUM(c) OVER () - 1 ELSE 1 END)"
        rank = self.sql.rank_value(f"100.0 * (SUM(c) OVER (ORDER BY s) - c) / {denominator}")
        self.run(
            f"""
            INSERT INTO eds_t_rank (score, pr)
            SELECT s, {rank} FROM (
                SELECT s, SUM(c) AS c FROM (
                    SELECT {score} AS s, COUNT(*) AS c FROM {scored} GROUP BY {score}
                    UNION ALL
                    SELECT 0, ({population}) - (SELECT COUNT(*) FROM {scored})
                ) parts GROUP BY s
            ) h WHERE c > 0
            """,
            extra,
        )
        return "COALESCE(rk.pr, 0)", f"LEFT JOIN eds_t_rank rk ON rk.score = {score_of_row}"

    def percentiles(self, table: str, raw: str, previous_raw: str, where: str = "1 = 1"):
        """p90 of the non-zero raw scores, now and one period earlier, in one pass."""
        if self.sql.postgres:
            self.run(
                f"""
                SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY {raw})
                        FILTER (WHERE {raw} > 0),
                    percentile_cont(0.9) WITHIN GROUP (ORDER BY {previous_raw})
                        FILTER (WHERE {previous_raw} > 0)
                FROM {table} WHERE {where}
                """
            )
            now, before = self.cursor.fetchone()
            return float(now or 0), float(before or 0)
        self.run(f"SELECT {raw}, {previous_raw} FROM {table} WHERE {where}")
        rows = self.cursor.fetchall()
        return (
            percentile_90([row[0] for row in rows if row[0] > 0]),
            percentile_90([row[1] for row in rows if row[1] > 0]),
        )

    def renormalise_users(self) -> None:
        """p90 may have moved: rescore the rows whose rounded score changes with it."""
        ws = "workspace_id = %(ws)s"
        self.temp("eds_t_rescored", "user_id BIGINT PRIMARY KEY, score INTEGER, previous INTEGER")
        p90s = self.percentiles("engagement_userscore", "raw_score", "previous_raw_score", ws)
        if p90s == (self.state.p90, self.state.previous_p90):
            return  # write_users already scored the changed users against these values
        self.state.p90, self.state.previous_p90 = p90s
        score = self.sql.score("raw_score", "%(p90)s")
        previous = self.sql.score("previous_raw_score", "%(previous_p90)s")
        extra = {"p90": self.state.p90, "previous_p90": self.state.previous_p90}
        self.run(
            f"""
            INSERT INTO eds_t_rescored (user_id, score, previous)
            SELECT user_id, {score}, {previous} FROM engagement_userscore
            WHERE {ws} AND (engagement_score <> {score} OR previous_score <> {previous}
                OR score_change <> {score} - {previous})
            """,
            extra,
        )
        self.run(
            """
            UPDATE engagement_userscore SET engagement_score = r.score,
                previous_score = r.previous, score_change = r.score - r.previous,
                computed_at = %(now)s
            FROM eds_t_rescored r
            WHERE engagement_userscore.workspace_id = %(ws)s
            AND engagement_userscore.user_id = r.user_id
            """
        )

    def update_ranks(self, table: str) -> None:
        """percentile_rank = 100 * (rows scoring lower) / (rows - 1), to one decimal.

        It depends only on a row's score and the workspace's score histogram, so one pass
        over the histogram rewrites only the rows whose rank moved.
        """
        if self.sql.postgres:
            # A histogram of at most 101 scores: hashing is the right plan here.
            self.cursor.execute("SET LOCAL enable_hashagg = on")
        denominator = "(CASE WHEN SUM(c) OVER () > 1 THEN SUM(c) OVER () - 1 ELSE 1 END)"
        rank = self.sql.rank_value(f"100.0 * (SUM(c) OVER (ORDER BY s) - c) / {denominator}")
        self.run(
            f"""
            UPDATE {table} SET percentile_rank = r.pr
            FROM (
                SELECT s, {rank} AS pr FROM (
                    SELECT engagement_score AS s, COUNT(*) AS c FROM {table}
                    WHERE workspace_id = %(ws)s GROUP BY engagement_score) h
            ) r
            WHERE {table}.workspace_id = %(ws)s AND {table}.engagement_score = r.s
            AND {table}.percentile_rank <> r.pr
            """
        )
        if self.sql.postgres:
            self.cursor.execute("SET LOCAL enable_hashagg = off")

    # --- accounts ---------------------------------------------------------------------------

    def aggregate_accounts(self) -> None:
        """Per scoped account: its own events, and its linked users' scores."""
        f = self.sql.float
        self.temp(
            "eds_t_account",
            f"account_id BIGINT PRIMARY KEY, raw {f}, previous_raw {f}, events BIGINT, "
            f"names_used INTEGER, active_days INTEGER, breakdown TEXT, "
            f"last_at {self.sql.timestamp}",
        )
        if self.sql.postgres:
            self._aggregate_accounts_postgres()
        else:
            self._aggregate_accounts_portable()
        self.temp(
            "eds_t_account_members",
            f"account_id BIGINT PRIMARY KEY, total INTEGER, active INTEGER, mean {f}, "
            f"previous_mean {f}, first_seen {self.sql.timestamp}",
        )
        scope = "" if self.everyone else "JOIN eds_t_scope_account s ON s.account_id = m.account_id"
        # Every linked user counts, scored or not (a user without a score row scores 0).
        self.run(
            f"""
            INSERT INTO eds_t_account_members
                (account_id, total, active, mean, previous_mean, first_seen)
            SELECT m.account_id, COUNT(*),
                COUNT(CASE WHEN us.raw_score > 0 THEN 1 END),
                AVG(COALESCE(us.engagement_score, 0)), AVG(COALESCE(us.previous_score, 0)),
                MIN(usr.first_seen_at)
            FROM engagement_membership m
            {scope}
            JOIN engagement_user usr ON usr.id = m.user_id
            LEFT JOIN engagement_userscore us
                ON us.workspace_id = %(ws)s AND us.user_id = m.user_id
            WHERE usr.product_id = %(product)s
            GROUP BY m.account_id
            """
        )
        self.analyze("eds_t_account", "eds_t_account_members")

    def _aggregate_accounts_postgres(self) -> None:
        # The cap applies to each user's events of a day within the account (one rollup row).
        scope = self._rollup_scope("eds_t_scope_account", "account_id")
        counted = f"LEAST(r.count, {int(self.cap)})" if self.cap is not None else "r.count"
        self.run(
            f"""
            INSERT INTO eds_t_account (account_id, raw, previous_raw, events, names_used,
                active_days, breakdown, last_at)
            SELECT e.account_id, SUM(e.counted * e.weight), SUM(e.previous_counted * e.weight),
                SUM(e.n), COUNT(*) FILTER (WHERE e.weight > 0 AND e.counted > 0),
                COALESCE(bit_count(CAST(bit_or(e.days) FILTER (WHERE e.weight > 0)
                    AS BIT(64))), 0),
                {self.sql.breakdown("e")}, MAX(e.last_at)
            FROM (
                SELECT ae.*, {self.weight_of("ae.event_name")} AS weight FROM (
                    SELECT r.account_id, r.event_name,
                        COALESCE(SUM({counted}) FILTER (WHERE r.day >= %(start)s), 0)
                            AS counted,
                        COALESCE(SUM(r.count) FILTER (WHERE r.day >= %(start)s), 0) AS n,
                        COALESCE(SUM({counted}) FILTER (WHERE r.day < %(start)s), 0)
                            AS previous_counted,
                        bit_or(CAST(1 AS BIGINT) << (r.day - %(prev_start)s))
                            FILTER (WHERE r.day >= %(start)s) AS days,
                        MAX(r.last_at) FILTER (WHERE r.day >= %(start)s) AS last_at
                    FROM engagement_eventrollup r {scope}
                    WHERE r.product_id = %(product)s AND r.account_id IS NOT NULL
                    AND r.day >= %(prev_start)s AND r.day <= %(end)s
                    GROUP BY r.account_id, r.event_name
                ) ae OFFSET 0
            ) e
            GROUP BY e.account_id
            """
        )

    def _aggregate_accounts_portable(self) -> None:
        self.temp(
            "eds_t_account_day",
            "account_id BIGINT, event_name VARCHAR(255), day DATE, n BIGINT, counted BIGINT, "
            f"weight INTEGER, cur INTEGER, last_at {self.sql.timestamp}",
        )
        self.run(
            f"""
            INSERT INTO eds_t_account_day
                (account_id, event_name, day, n, counted, weight, cur, last_at)
            SELECT r.account_id, r.event_name, r.day, SUM(r.count),
                SUM({self.capped("r.count")}), COALESCE(w.weight, 1),
                CASE WHEN r.day >= %(start)s THEN 1 ELSE 0 END, MAX(r.last_at)
            FROM engagement_eventrollup r
            {self._rollup_scope("eds_t_scope_account", "account_id")}
            LEFT JOIN eds_t_weight w ON w.event_name = r.event_name
            WHERE r.product_id = %(product)s AND r.account_id IS NOT NULL
            AND r.day >= %(prev_start)s AND r.day <= %(end)s
            GROUP BY r.account_id, r.event_name, r.day, w.weight
            """
        )
        self.temp(
            "eds_t_account_event",
            "account_id BIGINT, event_name VARCHAR(255), weight INTEGER, counted BIGINT, "
            f"n BIGINT, previous_counted BIGINT, last_at {self.sql.timestamp}",
        )
        self.run(
            """
            INSERT INTO eds_t_account_event
                (account_id, event_name, weight, counted, n, previous_counted, last_at)
            SELECT account_id, event_name, weight, SUM(cur * counted), SUM(cur * n),
                SUM((1 - cur) * counted), MAX(CASE WHEN cur = 1 THEN last_at END)
            FROM eds_t_account_day GROUP BY account_id, event_name, weight
            ORDER BY account_id, SUM(cur * counted) * weight DESC, event_name
            """
        )
        self.run(
            f"""
            INSERT INTO eds_t_account (account_id, raw, previous_raw, events, names_used,
                active_days, breakdown, last_at)
            SELECT e.account_id, SUM(e.counted * e.weight), SUM(e.previous_counted * e.weight),
                SUM(e.n), COUNT(CASE WHEN e.weight > 0 AND e.counted > 0 THEN 1 END),
                COALESCE(MAX(d.days), 0), {self.sql.breakdown("e")}, MAX(e.last_at)
            FROM eds_t_account_event e
            LEFT JOIN (
                SELECT account_id, COUNT(DISTINCT day) AS days FROM eds_t_account_day
                WHERE cur = 1 AND weight > 0 AND counted > 0 GROUP BY account_id
            ) d ON d.account_id = e.account_id
            GROUP BY e.account_id
            """
        )

    def write_accounts(self) -> None:
        sql = self.sql
        score = f"{sql.round_half_up('COALESCE(mb.mean, 0)')}"
        previous = f"{sql.round_half_up('COALESCE(mb.previous_mean, 0)')}"
        adoption = (
            f"CAST(COALESCE(a.names_used, 0) AS {sql.float}) / %(names)s"
            if self.weighted_names
            else "0"
        )
        started = f"COALESCE({sql.created_date('acc.traits')}, mb.first_seen, acc.created_at)"
        share = (
            f"(CASE WHEN COALESCE(mb.total, 0) = 0 THEN 0 "
            f"ELSE CAST(mb.active AS {sql.float}) / mb.total END)"
        )
        extra = {"names": float(self.weighted_names or 1)}
        scope, in_scope, population = self.in_scope("account")
        rank, rank_join = "0", ""
        if self.is_full:
            rank, rank_join = self.ranks(
                scored="eds_t_account_members mb",
                score=sql.round_half_up("mb.mean"),
                population=population,
                score_of_row=score,
                extra=extra,
            )
        columns = [
            *(c for c in _ACCOUNT_VALUE_COLUMNS if c != "last_seen"),
            *(["percentile_rank"] if self.is_full else []),
        ]
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns)
        # Last seen survives the window: an older value is kept when no event is in the window.
        last_seen = (
            "last_seen = CASE WHEN excluded.last_seen IS NULL "
            "THEN engagement_accountscore.last_seen "
            "WHEN engagement_accountscore.last_seen IS NULL "
            "OR excluded.last_seen > engagement_accountscore.last_seen "
            "THEN excluded.last_seen ELSE engagement_accountscore.last_seen END"
        )
        self.run(
            f"""
            INSERT INTO engagement_accountscore (workspace_id, account_id, engagement_score,
                score_change, raw_score, percentile_rank, active_days, events_in_window,
                adoption, last_seen, score_breakdown, computed_at, previous_raw_score,
                previous_score, tenure_days, active_users, total_users, active_user_share)
            SELECT %(ws)s, acc.id, {score}, {score} - {previous}, COALESCE(a.raw, 0),
                {rank}, COALESCE(a.active_days, 0), COALESCE(a.events, 0), {adoption},
                a.last_at, COALESCE(a.breakdown, {sql.empty_json}), %(now)s,
                COALESCE(a.previous_raw, 0), {previous}, {sql.tenure("%(today)s", started)},
                COALESCE(mb.active, 0), COALESCE(mb.total, 0), {share}
            FROM {scope}
            LEFT JOIN eds_t_account a ON a.account_id = acc.id
            LEFT JOIN eds_t_account_members mb ON mb.account_id = acc.id
            {rank_join}
            WHERE {in_scope}
            ON CONFLICT (workspace_id, account_id) DO UPDATE SET {updates}, {last_seen},
                computed_at = excluded.computed_at
            {sql.changed_guard("engagement_accountscore", [*columns, "last_seen"])}
            """,
            extra,
        )
