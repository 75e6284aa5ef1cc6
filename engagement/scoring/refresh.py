"""Refresh orchestration: one workspace at a time, in full or incrementally, then segments.

- a full rescore computes every user and account in scope (first run, new day, changed settings);
- an incremental refresh recomputes only users and accounts whose rollups, traits or links changed
  since the workspace's watermark, then re-normalises (p90 and the scores it moves), writing only
  rows whose values changed. Percentile ranks are not stored: they are read from the workspace's
  score histogram (ranks.workspace_percentile_ranks).
Everything is set-based SQL over the daily rollups (never the raw events) with temporary tables,
so a refresh stays bounded at a million users.
"""

# ruff: noqa: S608

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.db import connection
from django.utils import timezone

from engagement.backends import database_backend
from engagement.models import ScoringState, Workspace
from engagement.refresh_hooks import ScoresRefreshed, refresh_hooks_run
from engagement.scoring.aggregation import ACCOUNTS, USERS, aggregate, aggregate_account_members
from engagement.scoring.alongside import RescoreAlongside, rescore_alongside_start
from engagement.scoring.changes import (
    activity_kept_since,
    changes_since,
    load_changed,
    watermark_at,
    workspace_config_digest,
)
from engagement.scoring.figures import (
    ScoreRows,
    account_rows,
    figures_add,
    figures_recount,
    rescored_user_scores,
    scores_added,
    user_rows,
)
from engagement.scoring.locks import workspace_state_held
from engagement.scoring.ranks import p90_lags, percentiles, renormalise_users
from engagement.scoring.run import ScoringRun
from engagement.scoring.writing import (
    delete_out_of_scope,
    write_account_members,
    write_accounts,
    write_users,
)
from engagement.segments import segments_refresh
from engagement.stored_json import with_json_as_text

logger = logging.getLogger(__name__)

# The users and accounts an incremental refresh recomputed, by id.
RecomputedIds = tuple[frozenset[int], frozenset[int]]

# The score rows an incremental refresh may have changed: those it recomputed, wrote, deleted (out
# of scope) or re-normalised. Segments compare them, the hooks hear of them.
_TOUCHED_USERS = "SELECT user_id FROM eds_t_candidate_user UNION SELECT user_id FROM eds_t_rescored"
_TOUCHED_ACCOUNTS = "SELECT account_id FROM eds_t_candidate_account"


@dataclass(frozen=True, slots=True)
class RefreshResult:
    workspace_id: int
    mode: str  # "full", "incremental", "idle" (nothing changed) or "busy" (another refresh runs)
    users: int = 0  # users recomputed
    accounts: int = 0  # accounts recomputed
    duration_ms: int = 0


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
    own_transaction = not connection.in_atomic_block
    with workspace_state_held(ScoringState, workspace_id) as state:
        if state is None:
            return RefreshResult(workspace_id=workspace_id, mode="busy")
        # The account filter as text, read by read_account_filter: no stored value (nested
        # beyond json.loads, a number beyond Python's digits) can stop the refresh.
        workspaces = with_json_as_text(Workspace.objects.all(), "account_filter")
        workspace = workspaces.get(id=workspace_id)
        digest = workspace_config_digest(workspace=workspace)
        today = now.astimezone(UTC).date()
        since = changes_since(state)
        # Taken before anything is read: what this refresh sees is complete up to here.
        watermark = watermark_at(now)
        full = force_full or _needs_full(state, since=since, now=now, digest=digest)
        run = ScoringRun(
            workspace=workspace, state=state, now=now, today=today, own_transaction=own_transaction
        )
        scored = _scores_compute(run, full=full, since=since, watermark=watermark)
        if scored is None:
            return RefreshResult(workspace_id=workspace_id, mode="idle")
        users, accounts, recomputed = scored
        mode = "full" if full else "incremental"
        _scores_announce(
            workspace_id,
            now=now,
            mode=mode,
            # The first scoring, or one after a settings change: nobody's own doing.
            baseline=since is None or state.config_digest != digest,
            recomputed=recomputed,
        )
        duration_ms = int((time.monotonic() - started) * 1000)
        _state_record(
            state,
            now=now,
            watermark=watermark,
            today=today,
            full=full,
            digest=digest,
            ms=duration_ms,
        )
    if full:
        score_tables_analyze()
    return _logged(RefreshResult(workspace_id, mode, users, accounts, duration_ms))


def _logged(result: RefreshResult) -> RefreshResult:
    logger.info(
        "scores %s workspace=%s users=%s accounts=%s in %s ms",
        result.mode,
        result.workspace_id,
        result.users,
        result.accounts,
        result.duration_ms,
    )
    return result


def _scores_compute(
    run: ScoringRun, *, full: bool, since: datetime | None, watermark: datetime
) -> tuple[int, int, RecomputedIds | None] | None:
    """Rescore the workspace in full or incrementally, then close the run; returns the users
    and accounts scored, and after an incremental refresh the ids it recomputed. None when an
    incremental refresh finds nothing changed: then only the watermark moves."""
    try:
        if full:
            users, accounts = _rescore_everyone(run)
            return users, accounts, None
        assert since is not None  # an incremental refresh has a watermark (_needs_full)
        changed = _rescore_changed(run, since=since)
        if changed is None:
            # Nothing changed up to the watermark: it moves on all the same.
            run.state.scored_through = watermark
            run.state.save(update_fields=["scored_through"])
            return None
        users, accounts = changed
        return users, accounts, _recomputed_ids(run)
    finally:
        run.close()


def _scores_announce(
    workspace_id: int, *, now: datetime, mode: str, baseline: bool, recomputed: RecomputedIds | None
) -> None:
    """Refresh the workspace's segments, then tell the refresh hooks the scores changed
    (with the ids recomputed by an incremental refresh; None after a full rescore)."""
    segments_refresh(
        workspace_id=workspace_id,
        now=now,
        user_ids=recomputed[0] if recomputed else None,
        account_ids=recomputed[1] if recomputed else None,
    )
    refresh_hooks_run(
        ScoresRefreshed(
            workspace_id=workspace_id,
            now=now,
            mode=mode,
            baseline=baseline,
            user_ids=recomputed[0] if recomputed else None,
            account_ids=recomputed[1] if recomputed else None,
        )
    )


def _needs_full(state: ScoringState, *, since: datetime | None, now: datetime, digest: str) -> bool:
    """A full rescore: never scored, the activity log no longer reaches back to the watermark,
    a new day (the window moved), or the workspace's settings changed."""
    return (
        since is None
        or not activity_kept_since(since, now)
        or state.window_end != now.astimezone(UTC).date()
        or state.config_digest != digest
    )


def _state_record(
    state: ScoringState,
    *,
    now: datetime,
    watermark: datetime,
    today: date,
    full: bool,
    digest: str,
    ms: int,
) -> None:
    state.scored_through = watermark
    state.window_end = today
    state.refreshed_at = now
    state.last_refresh_ms = ms
    if full:
        state.config_digest = digest
        state.full_rescored_at = now
        state.last_full_rescore_ms = ms
    state.save()


def score_tables_analyze() -> None:
    """Refresh the planner's statistics of the score tables after a full rescore has committed.

    A workspace's first rescore fills tables whose statistics still say "empty", and until
    autovacuum catches up the next incremental refresh's statements on them are planned as if
    they were (a rank update planned so once took minutes instead of a fraction of a second).
    Outside the refresh's transaction, so the lock ANALYZE takes is not held across it; inside a
    caller's transaction it is left to autovacuum.
    """
    database_backend().score_tables_analyze()


def _recomputed_ids(run: ScoringRun) -> RecomputedIds:
    """The users and accounts whose score rows an incremental refresh may have changed (a
    handful, `_TOUCHED_USERS` and `_TOUCHED_ACCOUNTS`)."""
    run.run(_TOUCHED_USERS)
    users = frozenset(row[0] for row in run.cursor.fetchall())
    run.run(_TOUCHED_ACCOUNTS)
    return users, frozenset(row[0] for row in run.cursor.fetchall())


def _rescore_everyone(run: ScoringRun) -> tuple[int, int]:
    """A full rescore; returns the users and accounts scored."""
    # It reads every rollup of two windows, out of their stored order.
    database_backend().rollups_prefetch(run.workspace.product_id)
    run.full_rescore_start()
    alongside = rescore_alongside_start(run)
    try:
        return _rescore_everyone_scored(run, alongside)
    finally:
        if alongside is not None:
            alongside.close()


def _rescore_everyone_scored(
    run: ScoringRun, alongside: RescoreAlongside | None
) -> tuple[int, int]:
    """The users, then the accounts: aggregated here, or shared with (the users) and collected
    from (the accounts) `alongside`."""
    if alongside is None:
        aggregate(run, USERS)
    else:
        alongside.users_aggregate(run)
    # Everyone in scope is here, so p90 comes straight from this run's raw scores.
    run.state.p90, run.state.previous_p90 = percentiles(run, "eds_t_user", "raw", "previous_raw")
    run.state.p90_at = run.now
    write_users(run)
    if run.filtered:
        delete_out_of_scope(run, "user")
    # The members' figures first: they read the user rows just written, not the accounts', so
    # the other connection has that much longer to finish the accounts.
    aggregate_account_members(run)
    if alongside is None:
        aggregate(run, ACCOUNTS)
    else:
        alongside.accounts_collect(run)
    write_accounts(run)
    if run.filtered:
        delete_out_of_scope(run, "account")
    figures_recount(run)
    return run.state.scored_users, run.state.scored_accounts


def _rescore_changed(run: ScoringRun, *, since: datetime) -> tuple[int, int] | None:
    """Recompute what changed since `since`; None when nothing did (and p90 does not lag)."""
    if not load_changed(run, since=since) and not p90_lags(run.state, run.now):
        return None
    run.changes_start()
    run.load_weights()
    if run.filtered:
        run.load_matching_accounts()
        # An account entering or leaving the filter brings its users in or out of scope.
        _candidates_add(
            run,
            "user",
            "m.user_id",
            "engagement_membership m JOIN eds_t_candidate_account c ON c.account_id = m.account_id",
        )
    run.analyze("eds_t_candidate_user", "eds_t_candidate_account")

    users_change = _users_rescore_changed(run)
    accounts_change = _accounts_rescore_changed(run)
    figures_add(run, users=users_change, accounts=accounts_change)
    return run.count("eds_t_scope_user"), run.count("eds_t_scope_account")


def _candidates_add(run: ScoringRun, kind: str, column: str, source: str) -> None:
    """Add the ids `column` takes in `source` (FROM and joins) to eds_t_candidate_<kind>."""
    run.run(
        f"""
        INSERT INTO eds_t_candidate_{kind} ({kind}_id)
        SELECT DISTINCT {column} FROM {source}
        WHERE NOT EXISTS (
            SELECT 1 FROM eds_t_candidate_{kind} x WHERE x.{kind}_id = {column})
        """
    )


def _users_rescore_changed(run: ScoringRun) -> ScoreRows:
    """Rescore the candidate users in scope; returns how the workspace's user rows changed."""
    _scope_from_candidates(
        run,
        "user",
        in_scope="""EXISTS (SELECT 1 FROM engagement_membership m
            JOIN eds_t_match_account a ON a.account_id = m.account_id
            WHERE m.user_id = c.user_id)""",
    )
    # Only the candidates' rows are written or deleted: the kept figures move by their change,
    # and by the moves of the users re-normalised to a new p90.
    users_before = user_rows(run, among_candidates=True)
    delete_out_of_scope(run, "user", among_candidates=True)
    aggregate(run, USERS)
    write_users(run)
    renormalise_users(run)
    users_change = user_rows(run, among_candidates=True) - users_before
    users_change.user_scores = scores_added(users_change.user_scores, rescored_user_scores(run))
    return users_change


def _scope_from_candidates(run: ScoringRun, kind: str, *, in_scope: str) -> None:
    """eds_t_scope_<kind>: the candidates of `kind` (alias c) that are in scope, `in_scope`
    deciding under an account filter."""
    key = f"{kind}_id"
    run.temp(f"eds_t_scope_{kind}", f"{key} BIGINT PRIMARY KEY")
    where = f"WHERE {in_scope}" if run.filtered else ""
    run.run(
        f"INSERT INTO eds_t_scope_{kind} ({key}) "
        f"SELECT c.{key} FROM eds_t_candidate_{kind} c {where}"
    )
    run.analyze(f"eds_t_scope_{kind}")


def _accounts_rescore_changed(run: ScoringRun) -> ScoreRows:
    """Rescore the changed accounts and those of rescored users; returns how the workspace's
    account rows changed."""
    # Accounts: those that changed, and those of users whose values changed.
    _candidates_add(
        run,
        "account",
        "m.account_id",
        "engagement_membership m JOIN eds_t_candidate_user c ON c.user_id = m.user_id",
    )
    # The accounts of users re-normalised to a new p90, and nothing else: only their users'
    # scores moved. A p90 move at a million users re-normalises a hundred thousand users or
    # more, whose accounts' rollups, aggregated again, took 10-15 s in one refresh and set the
    # refreshes after it behind for minutes (docs/benchmarks.md, 2026-11-29).
    run.temp("eds_t_members_only_account", "account_id BIGINT PRIMARY KEY")
    run.run(
        """
        INSERT INTO eds_t_members_only_account (account_id)
        SELECT DISTINCT m.account_id FROM engagement_membership m
        JOIN eds_t_rescored r ON r.user_id = m.user_id
        WHERE NOT EXISTS (
            SELECT 1 FROM eds_t_candidate_account x WHERE x.account_id = m.account_id)
        """
    )
    run.run(
        "INSERT INTO eds_t_candidate_account (account_id) "
        "SELECT account_id FROM eds_t_members_only_account"
    )
    # Only now are the accounts known: the lineage around them is all this refresh reads.
    run.load_lineage(around="eds_t_candidate_account")
    if run.lineage:  # an account's figures cover its descendants: its ancestors change too
        _candidates_add(
            run,
            "account",
            "h.ancestor_id",
            "eds_t_lineage h JOIN eds_t_candidate_account c ON c.account_id = h.account_id",
        )
        # Up the lineage every account is rescored in full (members are summed per ancestor).
        run.run("DELETE FROM eds_t_members_only_account")
    _scope_from_candidates(
        run, "account", in_scope="c.account_id IN (SELECT account_id FROM eds_t_match_account)"
    )
    accounts_before = account_rows(run, among_candidates=True)
    delete_out_of_scope(run, "account", among_candidates=True)
    members = _members_only_set_apart(run)
    aggregate(run, ACCOUNTS)
    aggregate_account_members(run, accounts=members)
    write_accounts(run)
    write_account_members(run, "eds_t_members_only_account")
    return account_rows(run, among_candidates=True) - accounts_before


def _members_only_set_apart(run: ScoringRun) -> str:
    """Take the members-only accounts (eds_t_members_only_account, kept to those in scope) out
    of eds_t_scope_account, whose accounts are then aggregated and written in full; returns the
    table of every account whose members' figures are wanted (both)."""
    run.run(
        """
        DELETE FROM eds_t_members_only_account WHERE account_id NOT IN (
            SELECT account_id FROM eds_t_scope_account)
        """
    )
    if not run.count("eds_t_members_only_account"):
        return "eds_t_scope_account"
    run.temp("eds_t_members_account", "account_id BIGINT PRIMARY KEY")
    run.run("INSERT INTO eds_t_members_account SELECT account_id FROM eds_t_scope_account")
    run.run(
        """
        DELETE FROM eds_t_scope_account WHERE account_id IN (
            SELECT account_id FROM eds_t_members_only_account)
        """
    )
    run.analyze("eds_t_scope_account", "eds_t_members_account")
    return "eds_t_members_account"
