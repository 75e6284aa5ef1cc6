"""Whole-workspace figures, kept on the workspace's ScoringState by each refresh in the
transaction that writes the score rows: the overview and the workspace stats read them there
instead of counting a million rows per visit.

- the product's users and accounts created up to `counted_through` (those created later are
  counted when read, through the updated_at indexes: a refresh's worth of rows);
- the score rows: users, users with events in the window, accounts, accounts with an active
  user, and accounts per engagement score (the overview's bands).

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

    def __sub__(self, other: ScoreRows) -> ScoreRows:
        return ScoreRows(
            users=self.users - other.users,
            active_users=self.active_users - other.active_users,
            accounts=self.accounts - other.accounts,
            active_accounts=self.active_accounts - other.active_accounts,
            account_scores=[
                a - b for a, b in zip(self.account_scores, other.account_scores, strict=True)
            ],
        )


def counted_through(now: datetime) -> datetime:
    """Users and accounts created up to this instant are in a count taken at `now`: those
    committed late by up to the watermark's overlap are still ahead of it."""
    return now - timedelta(seconds=settings.SCORING_WATERMARK_OVERLAP_SECONDS)


def user_rows(run: ScoringRun, *, among_candidates: bool = False) -> ScoreRows:
    """The workspace's user score rows (or its candidates'): how many, how many active."""
    among = "AND user_id IN (SELECT user_id FROM eds_t_candidate_user)" if among_candidates else ""
    run.run(
        f"""
        SELECT COUNT(*), COUNT(CASE WHEN events_in_window > 0 THEN 1 END)
        FROM engagement_userscore WHERE workspace_id = %(ws)s {among}
        """
    )
    users, active = run.cursor.fetchone()
    return ScoreRows(users=int(users or 0), active_users=int(active or 0))


def account_rows(run: ScoringRun, *, among_candidates: bool = False) -> ScoreRows:
    """The workspace's account score rows (or its candidates'): how many, how many active,
    how many per score."""
    among = (
        "AND account_id IN (SELECT account_id FROM eds_t_candidate_account)"
        if among_candidates
        else ""
    )
    run.run(
        f"""
        SELECT engagement_score, COUNT(*), COUNT(CASE WHEN active_users > 0 THEN 1 END)
        FROM engagement_accountscore WHERE workspace_id = %(ws)s {among}
        GROUP BY engagement_score
        """
    )
    found = ScoreRows()
    for score, accounts, active in run.cursor.fetchall():
        found.accounts += int(accounts)
        found.active_accounts += int(active)
        found.account_scores[min(max(int(score), 0), SCORES - 1)] += int(accounts)
    return found


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
    _store(state, rows.users, rows.active_users, accounts)


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
    scores = [
        kept + change
        for kept, change in zip(kept_account_scores(state), accounts.account_scores, strict=True)
    ]
    _store(
        state,
        state.scored_users + users.users,
        state.active_users + users.active_users,
        ScoreRows(
            accounts=state.scored_accounts + accounts.accounts,
            active_accounts=state.active_accounts + accounts.active_accounts,
            account_scores=scores,
        ),
    )


def kept_account_scores(state: ScoringState) -> list[int]:
    """The state's scored accounts per score, one entry per score 0-100."""
    kept = list(state.account_scores or [])
    return (kept + _no_scores())[:SCORES]


def _store(state: ScoringState, users: int, active_users: int, accounts: ScoreRows) -> None:
    state.scored_users = max(users, 0)
    state.active_users = max(active_users, 0)
    state.scored_accounts = max(accounts.accounts, 0)
    state.active_accounts = max(accounts.active_accounts, 0)
    state.account_scores = [max(count, 0) for count in accounts.account_scores]
