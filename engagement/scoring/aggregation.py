"""Per scoped user or account: raw score now and one period earlier, events, what adoption counts
(features used, else weighted event names used), active days and the breakdown, read from the
daily rollups into eds_t_user or eds_t_account.

One aggregation serves both targets; what differs between them is data (`Target`). It runs as a
single pass on PostgreSQL, where the active days of each event travel as a bit mask, and through
day-level temporary tables on SQLite, which has no bit_or.
"""

# ruff: noqa: S608

from __future__ import annotations

from dataclasses import dataclass

from engagement.scoring.run import ScoringRun


@dataclass(frozen=True, slots=True)
class Target:
    name: str  # "user" or "account": names the key column and the scope and result tables
    # Where the daily cap applies: to each rollup row (one user's events of a day within one
    # account) or to the sum of a day's rollup rows (a user's events of a day, whichever
    # accounts they went to).
    caps_each_rollup: bool
    tracks_last_at: bool  # the latest event in the window, kept as the score's last_seen
    rollup_filter: str  # an extra condition on the rollups, starting with AND

    @property
    def key(self) -> str:
        return f"{self.name}_id"

    @property
    def table(self) -> str:
        return f"eds_t_{self.name}"


USERS = Target(name="user", caps_each_rollup=False, tracks_last_at=False, rollup_filter="")
ACCOUNTS = Target(
    name="account",
    caps_each_rollup=True,
    tracks_last_at=True,
    rollup_filter="AND r.account_id IS NOT NULL",
)


def result_table_create(run: ScoringRun, target: Target) -> None:
    """The target's (empty) result table: eds_t_user or eds_t_account."""
    f, ts = run.sql.float, run.sql.timestamp
    last_at = f", last_at {ts}" if target.tracks_last_at else ""
    run.temp(
        target.table,
        f"{target.key} BIGINT PRIMARY KEY, raw {f}, previous_raw {f}, events BIGINT, "
        f"adopted INTEGER, active_days INTEGER, breakdown TEXT{last_at}",
    )


# A range of user ids, lowest included, highest excluded.
UserIds = tuple[int, int]


def aggregate(run: ScoringRun, target: Target) -> None:
    """Fill the target's result table for every user or account in the run's scope."""
    result_table_create(run, target)
    if run.sql.postgres:
        _single_pass(run, target)
    else:
        _through_day_tables(run, target)
    run.analyze(target.table)


def users_aggregate_into(run: ScoringRun, ids: UserIds) -> None:
    """PostgreSQL: add the scoped users whose ids are in `ids` to eds_t_user (created by the
    caller), so that two connections can share a full rescore's users (scoring.alongside)."""
    _single_pass(run, USERS, ids)


def user_id_bounds(run: ScoringRun) -> UserIds | None:
    """The range of the product's user ids with rollups, or None when there are none."""
    run.run(
        "SELECT MIN(user_id), MAX(user_id) FROM engagement_eventrollup "
        "WHERE product_id = %(product)s"
    )
    first, last = run.cursor.fetchone()
    return None if first is None else (first, last + 1)


def _subject(run: ScoringRun, target: Target) -> str:
    """Whom a rollup counts for: its user, or its account (in a hierarchy, each ancestor)."""
    return run.account_rollups()[0] if target is ACCOUNTS else f"r.{target.key}"


def _rollups(run: ScoringRun, target: Target, join: str = "", within: str = "") -> str:
    """FROM and WHERE of the rollups of the scope over both windows, aliased r; `within`, a
    further condition starting with AND."""
    subject = _subject(run, target)
    lineage = run.account_rollups()[1] if target is ACCOUNTS else ""
    scope = (
        "" if run.everyone else f"JOIN eds_t_scope_{target.name} s ON s.{target.key} = {subject}"
    )
    return f"""
        FROM engagement_eventrollup r {lineage} {scope} {join}
        WHERE r.product_id = %(product)s {target.rollup_filter} {within}
        AND r.day >= %(prev_start)s AND r.day <= %(end)s
    """


def _single_pass(run: ScoringRun, target: Target, ids: UserIds | None = None) -> None:
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
        "e", arrives_in_name_order=target is USERS, quoted_names=run.load_quoted_names()
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


def _event_lookups(run: ScoringRun, alias: str) -> str:
    """The weight of the event name in `alias`, and its feature when the workspace has
    features: columns of a per-event grouping, so each is looked up once per subject and
    event name."""
    lookups = f", {run.weight_of(f'{alias}.event_name')} AS weight"
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
    subject = "r.account_id" if own else _subject(run, target)
    rollups = _own_account_rollups(run) if own else _rollups(run, target, within=within)
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
    scope = "" if run.everyone else f"AND r.account_id IN ({_descendants_of_scope()})"
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


def _through_day_tables(run: ScoringRun, target: Target) -> None:
    """SQLite: per subject, event and day (eds_t_<name>_day), then per subject and event
    (eds_t_<name>_event), then per subject, with the active days counted from the day table."""
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
    key, subject, last_at = target.key, _subject(run, target), target.tracks_last_at
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
        {_rollups(run, target, "LEFT JOIN eds_t_weight w ON w.event_name = r.event_name")}
        GROUP BY {subject}, r.event_name, r.day, w.weight
        """
    )


def aggregate_account_members(run: ScoringRun) -> None:
    """Per scoped account: its linked users, how many are active, their mean scores now and one
    period earlier (from the user scores just written) and the earliest first seen. Every linked
    user counts, scored or not (a user without a score row scores 0)."""
    f = run.sql.float
    run.temp(
        "eds_t_account_members",
        f"account_id BIGINT PRIMARY KEY, total INTEGER, active INTEGER, mean {f}, "
        f"previous_mean {f}, first_seen {run.sql.timestamp}",
    )
    if run.lineage:
        sums = _member_sums_up_the_lineage(run)
    else:
        scope = "" if run.everyone else "JOIN eds_t_scope_account s ON s.account_id = m.account_id"
        sums = _member_sums("engagement_membership", join=scope)
    # Without a hierarchy the memberships, users and score rows are merged in user order (the
    # memberships' unique index leads with the user) rather than hashed: 1.8 s instead of
    # 2.4-2.6 s for a million users (docs/benchmarks.md, 2026-11-28, 04:00-06:00 UTC).
    with run.hash_joins(allowed=run.lineage):
        run.run(
            f"""
            INSERT INTO eds_t_account_members
                (account_id, total, active, mean, previous_mean, first_seen)
            SELECT p.account_id, SUM(p.total), SUM(p.active),
                CAST(SUM(p.score_sum) AS {f}) / SUM(p.total),
                CAST(SUM(p.previous_sum) AS {f}) / SUM(p.total), MIN(p.first_seen)
            FROM ({sums}) p
            GROUP BY p.account_id
            """
        )
    run.analyze("eds_t_account_members")


def _member_sums(memberships: str, *, join: str = "", where: str = "") -> str:
    """Per account of `memberships` (a table of account_id, user_id): its users, the active
    ones, the sums of their scores now and one period earlier, and the earliest first seen."""
    return f"""
        SELECT m.account_id, COUNT(*) AS total,
            COUNT(CASE WHEN us.raw_score > 0 THEN 1 END) AS active,
            SUM(COALESCE(us.engagement_score, 0)) AS score_sum,
            SUM(COALESCE(us.previous_score, 0)) AS previous_sum,
            MIN(usr.first_seen_at) AS first_seen
        FROM {memberships} m {join}
        JOIN engagement_user usr ON usr.id = m.user_id
        LEFT JOIN engagement_userscore us
            ON us.workspace_id = %(ws)s AND us.user_id = m.user_id
        WHERE usr.product_id = %(product)s {where}
        GROUP BY m.account_id
    """


def _member_sums_up_the_lineage(run: ScoringRun) -> str:
    """In a hierarchy an account's users are its own and its descendants', each once. A user
    linked to one account (nearly all) cannot be counted twice, so those are summed per own
    account, as without links, and the sums added up the lineage; only the users linked to
    several accounts go through the DISTINCT over every (ancestor, user) pair, whose sort cost
    a rescore 4-6 s at the benchmark's scale when every user went through it."""
    _load_shared_users(run)
    within = "" if run.everyone else f"AND m.account_id IN ({_descendants_of_scope()})"
    own = _member_sums(
        "engagement_membership",
        join="LEFT JOIN eds_t_shared_user su ON su.user_id = m.user_id",
        where=f"AND su.user_id IS NULL {within}",
    )
    scope = "" if run.everyone else "JOIN eds_t_scope_account s ON s.account_id = h.ancestor_id"
    shared = run.memberships(
        scope="" if run.everyone else "eds_t_scope_account", users="eds_t_shared_user"
    )
    return f"""
        SELECT h.ancestor_id AS account_id, o.total, o.active, o.score_sum, o.previous_sum,
            o.first_seen
        FROM ({own}) o JOIN eds_t_lineage h ON h.account_id = o.account_id {scope}
        UNION ALL
        {_member_sums(shared)}
    """


def _load_shared_users(run: ScoringRun) -> None:
    """eds_t_shared_user: the users linked to more than one of the accounts the refresh reads
    (the product's, or the scoped accounts' and their descendants')."""
    run.temp("eds_t_shared_user", "user_id BIGINT PRIMARY KEY")
    if run.everyone:
        accounts = """JOIN engagement_account a ON a.id = n.account_id
            WHERE a.product_id = %(product)s"""
    else:
        accounts = f"WHERE n.account_id IN ({_descendants_of_scope()})"
    run.run(
        f"""
        INSERT INTO eds_t_shared_user (user_id)
        SELECT n.user_id FROM engagement_membership n {accounts}
        GROUP BY n.user_id HAVING COUNT(*) > 1
        """
    )
    run.analyze("eds_t_shared_user")


def _descendants_of_scope() -> str:
    """The scoped accounts and their descendants, as a subquery of account_id."""
    return """SELECT h.account_id FROM eds_t_lineage h
        JOIN eds_t_scope_account s ON s.account_id = h.ancestor_id"""
