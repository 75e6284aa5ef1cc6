"""Per scoped user or account: raw score now and one period earlier, events, what adoption counts
(features used, else weighted event names used), active days and the breakdown, read from the
daily rollups into eds_t_user or eds_t_account.

One aggregation serves both targets; what differs between them is data (`Target`). Each database
runs it its own way (DatabaseBackend.subjects_aggregate): a single pass on PostgreSQL, where the
active days of each event travel as a bit mask, and day-level temporary tables on SQLite, which
has no bit_or; the scope and the rollups it reads are defined here for both.
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
    run.backend.subjects_aggregate(run, target, None)
    run.analyze(target.table)


def users_aggregate_into(run: ScoringRun, ids: UserIds) -> None:
    """Add the scoped users whose ids are in `ids` to eds_t_user (created by the caller), so
    that two connections can share a full rescore's users (scoring.alongside: PostgreSQL)."""
    run.backend.subjects_aggregate(run, USERS, ids)


def user_id_bounds(run: ScoringRun) -> UserIds | None:
    """The range of the product's user ids with rollups, or None when there are none."""
    run.run(
        "SELECT MIN(user_id), MAX(user_id) FROM engagement_eventrollup "
        "WHERE product_id = %(product)s"
    )
    first, last = run.cursor.fetchone()
    return None if first is None else (first, last + 1)


def subject_of(run: ScoringRun, target: Target) -> str:
    """Whom a rollup counts for: its user, or its account (in a hierarchy, each ancestor)."""
    return run.account_rollups()[0] if target is ACCOUNTS else f"r.{target.key}"


def rollups_of(run: ScoringRun, target: Target, join: str = "", within: str = "") -> str:
    """FROM and WHERE of the rollups of the scope over both windows, aliased r; `join`, further
    joins; `within`, a further condition starting with AND."""
    subject = subject_of(run, target)
    lineage = run.account_rollups()[1] if target is ACCOUNTS else ""
    scope = (
        "" if run.everyone else f"JOIN eds_t_scope_{target.name} s ON s.{target.key} = {subject}"
    )
    return f"""
        FROM engagement_eventrollup r {lineage} {scope} {join}
        WHERE r.product_id = %(product)s {target.rollup_filter} {within}
        AND r.day >= %(prev_start)s AND r.day <= %(end)s
    """


def aggregate_account_members(run: ScoringRun, *, accounts: str = "eds_t_scope_account") -> None:
    """Per scoped account: its linked users, how many are active, their mean scores now and one
    period earlier (from the user scores just written) and the earliest first seen. Every linked
    user counts, scored or not (a user without a score row scores 0). `accounts`: the table of
    account_id to take outside a full rescore, when not the scope (no hierarchy: there the
    scope's descendants are read)."""
    f = run.sql.float
    run.temp(
        "eds_t_account_members",
        f"account_id BIGINT PRIMARY KEY, total INTEGER, active INTEGER, mean {f}, "
        f"previous_mean {f}, first_seen {run.sql.timestamp}",
    )
    if run.lineage:
        sums = _member_sums_up_the_lineage(run)
    else:
        scope = "" if run.everyone else f"JOIN {accounts} s ON s.account_id = m.account_id"
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
    within = "" if run.everyone else f"AND m.account_id IN ({descendants_of_scope()})"
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
        accounts = f"WHERE n.account_id IN ({descendants_of_scope()})"
    run.run(
        f"""
        INSERT INTO eds_t_shared_user (user_id)
        SELECT n.user_id FROM engagement_membership n {accounts}
        GROUP BY n.user_id HAVING COUNT(*) > 1
        """
    )
    run.analyze("eds_t_shared_user")


def descendants_of_scope() -> str:
    """The scoped accounts and their descendants, as a subquery of account_id."""
    return """SELECT h.account_id FROM eds_t_lineage h
        JOIN eds_t_scope_account s ON s.account_id = h.ancestor_id"""
