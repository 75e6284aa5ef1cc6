"""Writing the scores: user and account score rows, and removing the rows of users and accounts
that left the workspace's scope. p90 and re-normalisation: engagement/scoring/ranks.py."""

# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Sequence

from engagement.scoring.run import ScoringRun

USER_VALUE_COLUMNS = (
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
ACCOUNT_VALUE_COLUMNS = (
    *USER_VALUE_COLUMNS,
    "active_users",
    "total_users",
    "active_user_share",
)


def delete_out_of_scope(run: ScoringRun, kind: str, *, among_candidates: bool = False) -> None:
    """Drop the score rows of users (or accounts) no longer in the workspace's scope: all
    of them after a full rescore, only changed ones after an incremental refresh."""
    table, column = f"engagement_{kind}score", f"{kind}_id"
    candidates = (
        f"AND {column} IN (SELECT {column} FROM eds_t_candidate_{kind})" if among_candidates else ""
    )
    run.run(
        f"""
        DELETE FROM {table} WHERE workspace_id = %(ws)s {candidates}
        AND NOT EXISTS (SELECT 1 FROM eds_t_scope_{kind} s WHERE s.{column} = {table}.{column})
        """
    )


def write_users(run: ScoringRun) -> None:
    """Upsert the scoped users with the current p90; renormalise_users fixes a moved p90."""
    extra = {
        "p90": run.state.p90,
        "previous_p90": run.state.previous_p90,
        "names": float(run.adoption_total or 1),
    }
    values = _user_values(run)
    columns = list(USER_VALUE_COLUMNS)
    if not run.is_full:
        # A handful of changed users: one upsert.
        _upsert_users(run, values, columns, extra)
        return
    # A million users: an upsert would lock (and so rewrite) every existing row even when
    # nothing changed, and checks each new row against the unique index twice. Instead:
    # a plain insert into an empty workspace, else an update of the rows whose values
    # changed and an insert of the users not scored yet.
    _update_then_insert_users(run, values, columns, extra)


def _user_values(run: ScoringRun) -> str:
    """The SELECT of the scoped users' new score rows, one column per name in
    USER_VALUE_COLUMNS and user_id. It ends with its WHERE condition on the user `usr`, so a
    caller may add `AND ...` to it."""
    sql = run.sql
    score = sql.score("COALESCE(u.raw, 0)", "%(p90)s")
    previous = sql.score("COALESCE(u.previous_raw, 0)", "%(previous_p90)s")
    adoption = _adoption(run, "u")
    started = f"COALESCE({sql.created_date('usr.traits')}, usr.first_seen_at)"
    scope, in_scope = _in_scope(run, "user")
    return f"""
        SELECT usr.id AS user_id, {score} AS engagement_score,
            {score} - {previous} AS score_change, COALESCE(u.raw, 0) AS raw_score,
            COALESCE(u.active_days, 0) AS active_days, COALESCE(u.events, 0)
            AS events_in_window, {adoption} AS adoption, usr.last_seen_at AS last_seen,
            COALESCE(u.breakdown, {sql.empty_json}) AS score_breakdown,
            COALESCE(u.previous_raw, 0) AS previous_raw_score, {previous} AS previous_score,
            {sql.tenure("%(today)s", started)} AS tenure_days
        FROM {scope}
        LEFT JOIN eds_t_user u ON u.user_id = usr.id
        WHERE {in_scope}
    """


def _user_insert(values: str) -> str:
    """INSERT of every row of `values` (the _user_values SELECT) into engagement_userscore."""
    inserted = USER_VALUE_COLUMNS
    return f"""
        INSERT INTO engagement_userscore (workspace_id, user_id, computed_at,
            {", ".join(inserted)})
        SELECT %(ws)s, n.user_id, %(now)s, {", ".join(f"n.{c}" for c in inserted)}
        FROM ({values}) n
    """


def _upsert_users(
    run: ScoringRun, values: str, columns: list[str], extra: dict[str, float]
) -> None:
    """Insert the users of `values`, updating the `columns` of those already scored."""
    updates = _assignments(columns, "excluded")
    on_conflict = _on_conflict_update(run, "engagement_userscore", "user_id", updates, columns)
    run.run(
        f"""
        {_user_insert(values)} WHERE 1 = 1
        {on_conflict}
        """,
        extra,
    )


def _update_then_insert_users(
    run: ScoringRun, values: str, columns: list[str], extra: dict[str, float]
) -> None:
    """Update the `columns` of the users of `values` already scored whose values changed,
    then insert the others: a plain insert when the workspace has no user rows yet.

    All in user order: the users, their aggregates and their score rows are merged in that
    order, and new rows go in in that order, so where they are stored follows their users.
    The update then changes each page of the rows, and of each of their indexes, in one run
    instead of coming back to it at random: after a weight change, 10.8 s
    instead of 21.9 s for 800,000 rows, with 0.97 GB of WAL instead of 2.35 GB and a quarter of
    the buffer reads (docs/benchmarks.md)."""
    in_user_order = " ORDER BY n.user_id"
    has_rows = run.scalar("SELECT 1 FROM engagement_userscore WHERE workspace_id = %(ws)s LIMIT 1")
    with run.hash_joins(allowed=False):
        if not has_rows:
            run.run(_user_insert(values) + in_user_order, extra)
            return
        run.run(
            f"""
            UPDATE engagement_userscore SET {_assignments(columns, "n")}, computed_at = %(now)s
            FROM ({values}) n
            WHERE engagement_userscore.workspace_id = %(ws)s
            AND engagement_userscore.user_id = n.user_id
            AND {run.sql.row_differs("engagement_userscore", "n", columns)}
            """,
            extra,
        )
    if run.everyone and _every_user_has_a_row(run):
        return
    # The users without a row, picked before their values are worked out (values ends with its
    # WHERE), rather than all million worked out and then filtered.
    unscored = """
        AND NOT EXISTS (SELECT 1 FROM engagement_userscore x
            WHERE x.workspace_id = %(ws)s AND x.user_id = usr.id)
    """
    run.run(_user_insert(values + unscored) + in_user_order, extra)


def _every_user_has_a_row(run: ScoringRun) -> bool:
    """Whether each of the product's users has a score row in the workspace (a full rescore
    of everyone, after its update).

    Score rows are written only for the product's users and deleted with them
    (engagement.dependents), one per user, so as many rows as users means every user has one.
    Both counted in one statement, so in one snapshot. Almost always true after the first
    rescore, and far cheaper than looking for the users without a row (1.2-1.7 s for a million
    users, finding none: docs/benchmarks.md, 2026-11-28)."""
    return bool(
        run.scalar(
            """
            SELECT (SELECT COUNT(*) FROM engagement_userscore WHERE workspace_id = %(ws)s)
                = (SELECT COUNT(*) FROM engagement_user WHERE product_id = %(product)s)
            """
        )
    )


def _adoption(run: ScoringRun, alias: str) -> str:
    """The adoption of the aggregated row `alias`: its share of adopted names (%(names)s)."""
    if not run.adoption_total:
        return "0"
    return f"CAST(COALESCE({alias}.adopted, 0) AS {run.sql.float}) / %(names)s"


def _assignments(columns: Sequence[str], source: str) -> str:
    """SET list giving each of the columns the value of the same column of row `source`."""
    return ", ".join(f"{c} = {source}.{c}" for c in columns)


def _on_conflict_update(
    run: ScoringRun, table: str, key: str, assignments: str, guarded: Sequence[str]
) -> str:
    """An upsert's ON CONFLICT clause: apply `assignments` and stamp computed_at, skipping
    (on PostgreSQL) the rows whose `guarded` columns are unchanged."""
    return f"""
        ON CONFLICT (workspace_id, {key}) DO UPDATE SET {assignments},
            computed_at = excluded.computed_at
        {run.sql.changed_guard(table, guarded)}
    """


def _in_scope(run: ScoringRun, kind: str) -> tuple[str, str]:
    """FROM clause (aliased `usr` or `acc`) and WHERE condition of the users or accounts a
    rescore writes: all of the product's, or those of the scope table."""
    table, alias = ("engagement_user", "usr") if kind == "user" else ("engagement_account", "acc")
    if run.everyone:
        return f"{table} {alias}", f"{alias}.product_id = %(product)s"
    return f"eds_t_scope_{kind} s JOIN {table} {alias} ON {alias}.id = s.{kind}_id", "1 = 1"


# Last seen survives the window: an older value is kept when no event is in the window.
_ACCOUNT_LAST_SEEN_KEPT = (
    "last_seen = CASE WHEN excluded.last_seen IS NULL "
    "THEN engagement_accountscore.last_seen "
    "WHEN engagement_accountscore.last_seen IS NULL "
    "OR excluded.last_seen > engagement_accountscore.last_seen "
    "THEN excluded.last_seen ELSE engagement_accountscore.last_seen END"
)


def write_accounts(run: ScoringRun) -> None:
    """Upsert the scoped accounts, scored by their linked users' mean score (written first)."""
    score = _members_score(run)
    extra = {"names": float(run.adoption_total or 1)}
    scope, in_scope = _in_scope(run, "account")
    columns = [c for c in ACCOUNT_VALUE_COLUMNS if c != "last_seen"]
    updates = f"{_assignments(columns, 'excluded')}, {_ACCOUNT_LAST_SEEN_KEPT}"
    on_conflict = _on_conflict_update(
        run, "engagement_accountscore", "account_id", updates, [*columns, "last_seen"]
    )
    run.run(
        f"""
        {_account_insert_select(run, score=score)}
        FROM {scope}
        LEFT JOIN eds_t_account a ON a.account_id = acc.id
        LEFT JOIN eds_t_account_members mb ON mb.account_id = acc.id
        WHERE {in_scope}
        {on_conflict}
        """,
        extra,
    )


def write_account_members(run: ScoringRun, accounts: str) -> None:
    """Rewrite what the members' figures (eds_t_account_members) give of the score rows of the
    accounts in `accounts` (a table of account_id) and nothing else: accounts whose own rollups
    did not change but whose users' scores did (re-normalised to a new p90). Their other values
    are those the last refresh wrote, as a full rescore would write them again."""
    score, previous, share = _members_score(run), _members_previous(run), _members_share(run)
    values = {
        "engagement_score": score,
        "previous_score": previous,
        "score_change": f"{score} - {previous}",
        "active_users": "COALESCE(mb.active, 0)",
        "total_users": "COALESCE(mb.total, 0)",
        "active_user_share": share,
    }
    old = [f"engagement_accountscore.{column}" for column in values]
    run.run(
        f"""
        UPDATE engagement_accountscore SET
            {", ".join(f"{column} = {value}" for column, value in values.items())},
            computed_at = %(now)s
        FROM {accounts} x JOIN eds_t_account_members mb ON mb.account_id = x.account_id
        WHERE engagement_accountscore.workspace_id = %(ws)s
        AND engagement_accountscore.account_id = x.account_id
        AND {run.sql.values_differ(old, list(values.values()))}
        """
    )


def _members_score(run: ScoringRun) -> str:
    """An account's score: its linked users' mean score (members' figures `mb`), rounded."""
    return run.sql.round_half_up("COALESCE(mb.mean, 0)")


def _members_previous(run: ScoringRun) -> str:
    """An account's score one period earlier: its users' mean then, rounded."""
    return run.sql.round_half_up("COALESCE(mb.previous_mean, 0)")


def _members_share(run: ScoringRun) -> str:
    """The share of an account's linked users who are active."""
    return (
        f"(CASE WHEN COALESCE(mb.total, 0) = 0 THEN 0 "
        f"ELSE CAST(mb.active AS {run.sql.float}) / mb.total END)"
    )


def _account_insert_select(run: ScoringRun, *, score: str) -> str:
    """INSERT INTO engagement_accountscore and the SELECT list of its values, read from the
    account `acc`, its aggregate `a` and its members' figures `mb` (the caller's FROM)."""
    sql = run.sql
    previous = _members_previous(run)
    adoption = _adoption(run, "a")
    started = f"COALESCE({sql.created_date('acc.traits')}, mb.first_seen, acc.created_at)"
    share = _members_share(run)
    return f"""
        INSERT INTO engagement_accountscore (workspace_id, account_id, engagement_score,
            score_change, raw_score, active_days, events_in_window,
            adoption, last_seen, score_breakdown, computed_at, previous_raw_score,
            previous_score, tenure_days, active_users, total_users, active_user_share)
        SELECT %(ws)s, acc.id, {score}, {score} - {previous}, COALESCE(a.raw, 0),
            COALESCE(a.active_days, 0), COALESCE(a.events, 0), {adoption},
            a.last_at, COALESCE(a.breakdown, {sql.empty_json}), %(now)s,
            COALESCE(a.previous_raw, 0), {previous}, {sql.tenure("%(today)s", started)},
            COALESCE(mb.active, 0), COALESCE(mb.total, 0), {share}
    """
