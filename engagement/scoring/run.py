"""One refresh of one workspace: its parameters, its cursor and the temporary tables it creates.

SQL in the scoring package is assembled from fixed table and column names and dialect snippets;
every value is a query parameter.
"""

# ruff: noqa: S608

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.db import connection

from engagement.backends import database_backend
from engagement.features import EVENT_MAX, workspace_features
from engagement.hierarchy import lineage_around_query, lineage_query, product_has_hierarchy
from engagement.input_rules import text_fault
from engagement.models import Account, ScoringState, Workspace
from engagement.scoring.formula import scoring_window
from engagement.stored_json import read_account_filter
from engagement.traits import accounts_admitted


def db_datetime(value: datetime) -> datetime | str | None:
    """A datetime as the database takes it as a raw query parameter."""
    return connection.ops.adapt_datetimefield_value(value)


def db_date(value: date) -> object:
    """A date as the database takes it as a raw query parameter."""
    return connection.ops.adapt_datefield_value(value)


class StatementRunner:
    """Runs one job's SQL on the connection inside the caller's transaction, with `params` bound
    to every statement, and owns the temporary tables it creates: close() drops them, since the
    connection outlives the job. The score refresh (ScoringRun) and the history build
    (engagement.history_build.HistoryBuilder) both run through it."""

    def __init__(self, params: dict, *, local_settings: tuple[str, ...] = ()) -> None:
        # The database's own statements for the steps it runs its own way (aggregation,
        # percentiles, the history's passes), and its SQL expressions.
        self.backend = database_backend()
        self.sql = self.backend.dialect
        self.params = params
        self.cursor = connection.cursor()
        self._temp_tables: list[str] = []
        self.backend.job_settings(self.cursor, local_settings)

    def run(self, sql: str, extra: dict | None = None) -> int:
        params = {**self.params, **(extra or {})}
        self.cursor.execute(sql, params)
        return self.cursor.rowcount

    def scalar(self, sql: str, extra: dict | None = None) -> Any:
        # Any: the value's type is the one the SQL selects (a count, a number, a date).
        self.run(sql, extra)
        row = self.cursor.fetchone()
        return row[0] if row else None

    def count(self, table: str) -> int:
        return int(self.scalar(f"SELECT COUNT(*) FROM {table}") or 0)

    def temp(self, name: str, columns: str) -> None:
        """Create (or empty) a temporary table that close() drops."""
        self.cursor.execute(f"DROP TABLE IF EXISTS {name}")
        self.backend.temp_table_create(self.cursor, name, columns)
        if name not in self._temp_tables:
            self._temp_tables.append(name)

    @contextmanager
    def hash_aggregation(self, *, allowed: bool) -> Iterator[None]:
        """Within the block, PostgreSQL may hash-aggregate or not; after it, as before. For the
        statements whose groups arrive in order, or whose groups fit in memory, where the
        job's setting (a score refresh turns hashing off, see ScoringRun) does not suit."""
        with self.backend.planner_method(self.cursor, "enable_hashagg", allowed):
            yield

    @contextmanager
    def hash_joins(self, *, allowed: bool) -> Iterator[None]:
        """Within the block, PostgreSQL may join by hashing or not; after it, as before. Without,
        a million users are joined by merging their rows in user order, each side read in
        that order, so the statement also meets (and writes) rows in that order."""
        with self.backend.planner_method(self.cursor, "enable_hashjoin", allowed):
            yield

    def analyze(self, *names: str) -> None:
        """Statistics of fresh temporary tables, for the planner to choose between index
        lookups for a handful of changed users and hash joins for a million."""
        self.backend.temp_tables_analyze(self.cursor, names)

    def close(self) -> None:
        """Drop this job's temporary tables: the connection outlives the job."""
        for name in self._temp_tables:
            self.cursor.execute(f"DROP TABLE IF EXISTS {name}")
        self.cursor.close()


def _event_names(events: object) -> list[str]:
    """A feature's event names as scoring reads them: the names of its list that could be stored
    (engagement.features checks them as written; whatever was stored past that is skipped)."""
    if not isinstance(events, list):
        return []
    return [name for name in events if text_fault(name, max_length=EVENT_MAX) is None]


class WorkspaceRun(StatementRunner):
    """A job over one workspace's rollups: the score refresh (ScoringRun) and the history build
    (engagement.history_build.HistoryBuilder). The workspace's rules that both apply are loaded
    here once: its event weights, its daily cap and the accounts and users its filter admits."""

    def __init__(
        self,
        workspace: Workspace,
        params: dict,
        *,
        local_settings: tuple[str, ...] = (),
        own_transaction: bool = False,
    ) -> None:
        super().__init__(params, local_settings=local_settings)
        self.workspace = workspace
        # The job's transaction is its caller's outermost: every row it reads but its own
        # writes is committed, so another connection reads the same (scoring.alongside).
        self.own_transaction = own_transaction
        # A cap below 1 (0, stored past the checks) would zero every score: 1, the least cap.
        cap = workspace.daily_event_cap
        self.cap = None if cap is None else max(cap, 1)
        # As reads apply it: a filter that is not an object filters nothing.
        self.filtered = bool(read_account_filter(workspace))
        # Adoption's denominator: the number of features, else of weighted names (load_weights).
        self.adoption_total = 0
        self.has_features = False
        # Whether the product's accounts form a hierarchy: then an account's figures cover its
        # descendants, through eds_t_lineage (load_lineage).
        self.lineage = False

    def capped(self, expr: str) -> str:
        """A day's count of one event, at most the workspace's daily cap."""
        return self.sql.at_most(expr, self.cap)

    def load_weights(self) -> None:
        """The workspace's event weights, as table eds_t_weight and as the %(weights)s JSON, and
        adoption's denominator (with its features, when the workspace defines any)."""
        self.temp("eds_t_weight", "event_name VARCHAR(255) PRIMARY KEY, weight INTEGER NOT NULL")
        weights = list(self.workspace.weights.values_list("event_name", "weight"))
        self.cursor.executemany(
            "INSERT INTO eds_t_weight (event_name, weight) VALUES (%s, %s)", weights
        )
        self.params["weights"] = json.dumps(dict(weights))
        features = workspace_features(workspace_id=self.workspace.id)
        if features:
            # Adoption is the share of features used; an event's feature by number, looked up
            # like the weights (table eds_t_feature, or the %(features)s JSON: backends).
            feature_of = {
                event: number
                for number, events in enumerate(features.values())
                for event in _event_names(events)
            }
            self.temp("eds_t_feature", "event_name VARCHAR(255) PRIMARY KEY, feature INTEGER")
            self.cursor.executemany(
                "INSERT INTO eds_t_feature (event_name, feature) VALUES (%s, %s)",
                list(feature_of.items()),
            )
            self.params["features"] = json.dumps(feature_of)
            self.has_features, self.adoption_total = True, len(features)
            return
        # Without features, adoption is a share of the workspace's weighted names: every name
        # the product sent that is not excluded (unlisted names weigh 1).
        self.adoption_total = int(
            self.scalar(
                """
                SELECT COUNT(*) FROM engagement_eventname n
                LEFT JOIN eds_t_weight w ON w.event_name = n.name
                WHERE n.product_id = %(product)s AND COALESCE(w.weight, 1) > 0
                """
            )
            or 0
        )

    def load_lineage(self, *, around: str | None = None) -> None:
        """eds_t_lineage: each account of the product with itself and each of its ancestors
        (engagement/hierarchy), when any account has a parent; otherwise nothing, and accounts
        are aggregated alone as before. `around` (a table of account_id: an incremental
        refresh's candidates) keeps only the pairs whose ancestor is one of those accounts or
        their ancestors, all that refresh reads."""
        self.lineage = product_has_hierarchy(self.workspace.product_id)
        if not self.lineage:
            return
        self.temp("eds_t_lineage", "account_id BIGINT, ancestor_id BIGINT")
        pairs = lineage_around_query(around) if around else lineage_query("%(product)s")
        self.run(f"INSERT INTO eds_t_lineage (account_id, ancestor_id) {pairs}")
        self.cursor.execute("CREATE INDEX eds_t_lineage_account ON eds_t_lineage (account_id)")
        # From a scope of ancestors (an incremental refresh's few) down to their descendants.
        self.cursor.execute("CREATE INDEX eds_t_lineage_ancestor ON eds_t_lineage (ancestor_id)")
        self.analyze("eds_t_lineage")

    def account_rollups(self) -> tuple[str, str]:
        """Whom an account's rollup row (alias r) counts for, and the join that gives it: its
        account or, in a hierarchy, each of the account's ancestors (itself included)."""
        if self.lineage:
            return "h.ancestor_id", "JOIN eds_t_lineage h ON h.account_id = r.account_id"
        return "r.account_id", ""

    def memberships(self, *, scope: str = "", users: str = "") -> str:
        """The product's account memberships as a table of (account_id, user_id): in a
        hierarchy, an account's users are its own and its descendants', each once. `scope`
        (a table of account_id) limits the accounts and `users` (a table of user_id) the users
        inside the DISTINCT, which the planner would otherwise compute for the whole product
        before joining them."""
        if not self.lineage:
            return "engagement_membership"
        in_scope = f"JOIN {scope} s0 ON s0.account_id = h.ancestor_id" if scope else ""
        among = f"JOIN {users} u0 ON u0.user_id = n.user_id" if users else ""
        return f"""(SELECT DISTINCT h.ancestor_id AS account_id, n.user_id
            FROM eds_t_lineage h {in_scope}
            JOIN engagement_membership n ON n.account_id = h.account_id {among})"""

    def load_matching_accounts(self) -> None:
        """Accounts the workspace's account filter admits (only built when a filter is set)."""
        self.temp("eds_t_match_account", "account_id BIGINT PRIMARY KEY")
        queryset = accounts_admitted(
            Account.objects.filter(product_id=self.workspace.product_id),
            read_account_filter(self.workspace),
        )
        sql, params = queryset.values("id").query.sql_with_params()
        self.cursor.execute(f"INSERT INTO eds_t_match_account (account_id) {sql}", params)
        self.analyze("eds_t_match_account")

    def load_scoped_users(self) -> None:
        """eds_t_scope_user: the users linked to an admitted account (after
        load_matching_accounts)."""
        self.temp("eds_t_scope_user", "user_id BIGINT PRIMARY KEY")
        self.run(
            """
            INSERT INTO eds_t_scope_user (user_id)
            SELECT DISTINCT m.user_id FROM engagement_membership m
            JOIN eds_t_match_account a ON a.account_id = m.account_id
            """
        )
        self.analyze("eds_t_scope_user")


class ScoringRun(WorkspaceRun):
    """The state one refresh shares between its statements, inside the caller's transaction.

    `is_full`: a full rescore (it sees every row, so it also writes percentile ranks).
    `everyone`: a full rescore without an account filter, which needs no scope tables.
    `own_transaction`: the caller holds no transaction of its own (see WorkspaceRun).
    """

    def __init__(
        self,
        *,
        workspace: Workspace,
        state: ScoringState,
        now: datetime,
        today: date,
        own_transaction: bool = False,
    ) -> None:
        window = scoring_window(lookback_days=workspace.lookback_days, today=today)
        # Aggregations over millions of rollups stay in memory instead of spilling to disk.
        # Rollups are read in user order (the unique index leads with user_id) and grouped as
        # they stream: far cheaper than hashing millions of groups, which the planner picks from
        # poor estimates. JIT compiling these statements costs more than it saves.
        super().__init__(
            workspace,
            {
                "ws": workspace.id,
                "product": workspace.product_id,
                "start": db_date(window.start),
                "end": db_date(window.end),
                "prev_start": db_date(window.previous_start),
                "prev_end": db_date(window.previous_end),
                "today": db_date(today),
                "now": db_datetime(now),
            },
            local_settings=(
                f"work_mem = '{int(settings.SCORING_WORK_MEM_MB)}MB'",
                "enable_hashagg = off",
                "max_parallel_workers_per_gather = 0",
                "jit = off",
            ),
            own_transaction=own_transaction,
        )
        self.state = state
        self.now = now
        self.window = window
        self.is_full = False
        self.everyone = False

    def changes_start(self) -> None:
        """What an incremental refresh sets before it reads the changed subjects' rows: the
        planner's price of a page read at random (`SCORING_RANDOM_PAGE_COST`, this transaction
        only; 0 keeps the server's). Those rollups and score rows were just written by the
        drain and the refresh before, so they are in memory, where a random read costs about
        what a sequential one does. At PostgreSQL's default of 4, 5,000 changed accounts of a
        hundred thousand had their rollups read by scanning all ten million (1.3 s) rather than
        their half million by index (0.7 s). A full rescore reads everything and keeps the
        server's price: at 1.1 it took 6-9% longer (docs/benchmarks.md, 2026-11-29)."""
        cost = settings.SCORING_RANDOM_PAGE_COST
        if cost:
            self.backend.job_settings(self.cursor, [f"random_page_cost = {cost!r}"])

    def full_rescore_start(self) -> None:
        """What a full rescore loads before aggregating: the weights, the lineage and, with an
        account filter, the accounts and users in scope."""
        self.is_full = True
        self.everyone = not self.filtered
        self.load_weights()
        self.load_lineage()
        if self.filtered:
            self.load_matching_accounts()
            self.load_scoped_users()
            self.temp("eds_t_scope_account", "account_id BIGINT PRIMARY KEY")
            self.run("INSERT INTO eds_t_scope_account SELECT account_id FROM eds_t_match_account")
            self.analyze("eds_t_scope_account")
