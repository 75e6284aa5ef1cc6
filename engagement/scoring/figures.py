"""Whole-workspace figures, kept on the workspace's ScoringState by each refresh in the
transaction that writes the score rows: the overview and the workspace stats read them there
instead of counting a million rows per visit.

- the product's users and accounts created up to `counted_through` (those created later are
  counted when read, through the updated_at indexes: a refresh's worth of rows);
- the score rows: users, users with events in the window, accounts, accounts with an active
  user, and accounts and users per engagement score (the overview's bands; the histograms the
  incremental refresh's percentile ranks are read from).

A full rescore counts everything afresh. An incremental refresh writes and deletes only its
candidates' score rows, so it counts theirs before and after and adds the difference, and adds
the users and accounts created since the last count. Rows deleted outside a refresh (an erasure,
a user deleted by hand) stay counted until the next full rescore: an erasure asks for one, and
each new day starts with one.
"""

# ruff: noqa: S608

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from engagement.models import ScoringState
from engagement.scoring.run import ScoringRun, db_datetime

SCORES = 101  # engagement scores 0 to 100


def _no_scores() -> list[int]:
    return [0] * SCORES


@dataclass(slots=True)
class ScoreRows:
    """Counts of score rows: of a workspace, or of a refresh's candidates."""

    users: int = 0
    active_users: int = 0  # with events in the window
    accounts: int = 0
    active_accounts: int = 0  # with at least one active user
    account_scores: list[int] = field(default_factory=_no_scores)  # accounts per score
    user_scores: list[int] = field(default_factory=_no_scores)  # users per score

    def __sub__(self, other: ScoreRows) -> ScoreRows:
        return ScoreRows(
            users=self.users - other.users,
            active_users=self.active_users - other.active_users,
            accounts=self.accounts - other.accounts,
            active_accounts=self.active_accounts - other.active_accounts,
            account_scores=scores_added(self.account_scores, other.account_scores, sign=-1),
            user_scores=scores_added(self.user_scores, other.user_scores, sign=-1),
        )


def scores_added(kept: list[int], change: list[int], *, sign: int = 1) -> list[int]:
    """Two per-score histograms added (or, with sign -1, the second taken from the first)."""
    return [a + sign * b for a, b in zip(kept, change, strict=True)]


def _score_index(score: float) -> int:
    return min(max(int(score), 0), SCORES - 1)


def counted_through(now: datetime) -> datetime:
    """Users and accounts created up to this instant are in a count taken at `now`: those
    committed late by up to the watermark's overlap are still ahead of it."""
    return now - timedelta(seconds=settings.SCORING_WATERMARK_OVERLAP_SECONDS)


def _per_score(run: ScoringRun, sql: str) -> list[tuple]:
    """Rows of a count of score rows grouped by score: at most 101 groups, hashed. A refresh
    turns hash aggregation off (see ScoringRun), and without it PostgreSQL walks the rank
    index over a million user rows to group them in score order: 3.1 s against 0.4-0.6 s
    hashed (docs/benchmarks.md)."""
    with run.hash_aggregation(allowed=True):
        run.run(sql)
        return run.cursor.fetchall()


def user_rows(run: ScoringRun, *, among_candidates: bool = False) -> ScoreRows:
    """The workspace's user score rows (or its candidates'): how many, how many active (with
    events in the window), how many per score."""
    rows, active, scores = _score_rows(run, "user", "events_in_window > 0", among_candidates)
    return ScoreRows(users=rows, active_users=active, user_scores=scores)


def account_rows(run: ScoringRun, *, among_candidates: bool = False) -> ScoreRows:
    """The workspace's account score rows (or its candidates'): how many, how many active
    (with an active user), how many per score."""
    rows, active, scores = _score_rows(run, "account", "active_users > 0", among_candidates)
    return ScoreRows(accounts=rows, active_accounts=active, account_scores=scores)


def _score_rows(
    run: ScoringRun, kind: str, active: str, among_candidates: bool
) -> tuple[int, int, list[int]]:
    """The workspace's score rows of `kind` ("user" or "account"), or its candidates' (table
    eds_t_candidate_<kind>): how many, how many `active` (a condition on the row), how many
    per score."""
    key = f"{kind}_id"
    among = f"AND {key} IN (SELECT {key} FROM eds_t_candidate_{kind})" if among_candidates else ""
    per_score = _per_score(
        run,
        f"""
        SELECT engagement_score, COUNT(*), COUNT(CASE WHEN {active} THEN 1 END)
        FROM engagement_{kind}score WHERE workspace_id = %(ws)s {among}
        GROUP BY engagement_score
        """,
    )
    rows, active_rows, scores = 0, 0, _no_scores()
    for score, count, active_count in per_score:
        rows += int(count)
        active_rows += int(active_count)
        scores[_score_index(score)] += int(count)
    return rows, active_rows, scores


def rescored_user_scores(run: ScoringRun) -> list[int]:
    """How the users re-normalised (eds_t_rescored) but not recomputed moved between scores:
    the candidates' moves are counted by user_rows before and after."""
    run.run(
        """
        SELECT s, SUM(d) FROM (
            SELECT score AS s, 1 AS d FROM eds_t_rescored r
            WHERE NOT EXISTS (SELECT 1 FROM eds_t_candidate_user c WHERE c.user_id = r.user_id)
            UNION ALL
            SELECT was AS s, -1 AS d FROM eds_t_rescored r
            WHERE NOT EXISTS (SELECT 1 FROM eds_t_candidate_user c WHERE c.user_id = r.user_id)
        ) moved GROUP BY s
        """
    )
    change = _no_scores()
    for score, moved in run.cursor.fetchall():
        change[_score_index(score)] += int(moved)
    return change


def _created(run: ScoringRun, table: str, after: datetime | None, through: datetime) -> int:
    """The product's users (or accounts) created after `after` (None: ever) up to `through`.
    A row is created with updated_at equal to created_at, so the updated_at index finds the
    recent ones."""
    recent = "AND updated_at > %(after)s AND created_at > %(after)s" if after is not None else ""
    extra = {"through": db_datetime(through)}
    if after is not None:
        extra["after"] = db_datetime(after)
    return int(
        run.scalar(
            f"""
            SELECT COUNT(*) FROM {table}
            WHERE product_id = %(product)s AND created_at <= %(through)s {recent}
            """,
            extra,
        )
        or 0
    )


def figures_recount(run: ScoringRun) -> None:
    """After a full rescore: every figure counted afresh into the run's state."""
    state, through = run.state, counted_through(run.now)
    rows = user_rows(run)
    accounts = account_rows(run)
    state.counted_through = through
    state.product_users = _created(run, "engagement_user", None, through)
    state.product_accounts = _created(run, "engagement_account", None, through)
    _store(state, rows, accounts)


def figures_add(run: ScoringRun, *, users: ScoreRows, accounts: ScoreRows) -> None:
    """After an incremental refresh: the change of its candidates' rows (`users` and
    `accounts`, after minus before) and the users and accounts created since the last count."""
    state, through = run.state, counted_through(run.now)
    if state.counted_through is None:
        figures_recount(run)  # never counted: nothing to add to
        return
    if through > state.counted_through:
        previous = state.counted_through
        state.product_users += _created(run, "engagement_user", previous, through)
        state.product_accounts += _created(run, "engagement_account", previous, through)
        state.counted_through = through
    kept_users = kept_histogram(state, "user")
    user_scores = (
        scores_added(kept_users, users.user_scores)
        if kept_users is not None
        # Never counted (scored before they were kept), or no longer adding up: counted afresh.
        else user_rows(run).user_scores
    )
    _store(
        state,
        ScoreRows(
            users=state.scored_users + users.users,
            active_users=state.active_users + users.active_users,
            user_scores=user_scores,
        ),
        ScoreRows(
            accounts=state.scored_accounts + accounts.accounts,
            active_accounts=state.active_accounts + accounts.active_accounts,
            account_scores=scores_added(kept_account_scores(state), accounts.account_scores),
        ),
    )


def kept_account_scores(state: ScoringState) -> list[int]:
    """The state's scored accounts per score, one entry per score 0-100."""
    kept = list(state.account_scores or [])
    return (kept + _no_scores())[:SCORES]


def kept_histogram(state: ScoringState, kind: str) -> list[int] | None:
    """The state's users (`kind` "user") or accounts per score (0-100), when they add up to the
    rows it counted; None when they were never counted or do not (the caller counts the rows)."""
    if kind == "user":
        kept, rows = list(state.user_scores or []), state.scored_users
    else:
        kept, rows = kept_account_scores(state), state.scored_accounts
    return kept if len(kept) == SCORES and sum(kept) == rows else None


def _store(state: ScoringState, users: ScoreRows, accounts: ScoreRows) -> None:
    state.scored_users = max(users.users, 0)
    state.active_users = max(users.active_users, 0)
    state.user_scores = [max(count, 0) for count in users.user_scores]
    state.scored_accounts = max(accounts.accounts, 0)
    state.active_accounts = max(accounts.active_accounts, 0)
    state.account_scores = [max(count, 0) for count in accounts.account_scores]
