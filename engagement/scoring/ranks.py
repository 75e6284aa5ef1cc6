"""Normalisation after scores are written: p90 of the raw scores (now and one period earlier) and
the re-normalisation of rows whose rounded score moves with it; and the percentile ranks, read
from the workspace's per-score histogram (formula.percentile_ranks) rather than stored."""

# ruff: noqa: S608

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count

from engagement.models import AccountScore, ScoringState, UserScore
from engagement.scoring.figures import SCORES, kept_histogram
from engagement.scoring.formula import percentile_ranks
from engagement.scoring.run import ScoringRun


def percentiles(
    run: ScoringRun, table: str, raw: str, previous_raw: str, where: str = "1 = 1"
) -> tuple[float, float]:
    """p90 of the non-zero raw scores, now and one period earlier, in one pass."""
    return run.backend.raw_percentiles(run, table, raw, previous_raw, where)


def p90_due(state: ScoringState, now: datetime) -> bool:
    """Whether an incremental refresh at `now` takes p90 again over every score row: always in a
    workspace of fewer than SCORING_P90_EXACT_USERS scored users (the pass is cheap there, and a
    few events move p90 far) or with no p90 yet; in a larger one when it was taken
    SCORING_P90_SECONDS ago or more. Between, changed users are scored against the p90 kept, as
    every other row is: the workspace's scores stay consistent with each other and differ from
    their exact values by p90's relative move since it was taken."""
    if state.scored_users < settings.SCORING_P90_EXACT_USERS or state.p90 <= 0:
        return True
    period = timedelta(seconds=settings.SCORING_P90_SECONDS)
    return state.p90_at is None or now - state.p90_at >= period


def p90_lags(state: ScoringState, now: datetime) -> bool:
    """Whether p90 is due and scores were written since it was taken: a refresh must take it
    again even with nothing else changed, or the lag would last until the next change."""
    return p90_due(state, now) and (
        state.p90_at is None
        or (state.refreshed_at is not None and state.refreshed_at > state.p90_at)
    )


def renormalise_users(run: ScoringRun) -> None:
    """p90 may have moved: when it is due (p90_due), take it again and rescore the rows whose
    rounded score changes with it."""
    ws = "workspace_id = %(ws)s"
    run.temp(
        "eds_t_rescored", "user_id BIGINT PRIMARY KEY, score INTEGER, previous INTEGER, was INTEGER"
    )
    if not p90_due(run.state, run.now):
        return
    p90s = percentiles(run, "engagement_userscore", "raw_score", "previous_raw_score", ws)
    run.state.p90_at = run.now
    if p90s == (run.state.p90, run.state.previous_p90):
        return  # write_users already scored the changed users against these values
    run.state.p90, run.state.previous_p90 = p90s
    score = run.sql.score("raw_score", "%(p90)s")
    previous = run.sql.score("previous_raw_score", "%(previous_p90)s")
    extra = {"p90": run.state.p90, "previous_p90": run.state.previous_p90}
    run.run(
        f"""
        INSERT INTO eds_t_rescored (user_id, score, previous, was)
        SELECT user_id, {score}, {previous}, engagement_score FROM engagement_userscore
        WHERE {ws} AND (engagement_score <> {score} OR previous_score <> {previous}
            OR score_change <> {score} - {previous})
        """,
        extra,
    )
    run.run(
        """
        UPDATE engagement_userscore SET engagement_score = r.score,
            previous_score = r.previous, score_change = r.score - r.previous,
            computed_at = %(now)s
        FROM eds_t_rescored r
        WHERE engagement_userscore.workspace_id = %(ws)s
        AND engagement_userscore.user_id = r.user_id
        """
    )


def workspace_percentile_ranks(
    workspace_id: int, kind: str, *, counted: bool = False
) -> tuple[float | None, ...]:
    """The percentile rank of each score 0-100 among the workspace's users (`kind` "user") or
    accounts: from the histogram the last refresh kept on the workspace's state (one row read),
    or, when `counted` or when the state keeps none, from the score rows counted now (what a
    segment refreshed inside the refresh's own transaction must see)."""
    histogram = None
    if not counted:
        state = ScoringState.objects.filter(workspace_id=workspace_id).first()
        histogram = None if state is None else kept_histogram(state, kind)
    if histogram is None:
        model = UserScore if kind == "user" else AccountScore
        histogram = [0] * SCORES
        rows = (
            model.objects.filter(workspace_id=workspace_id)
            .values_list("engagement_score")
            .annotate(rows=Count("*"))
            .order_by()
        )
        for score, count in rows:
            histogram[min(max(int(score), 0), SCORES - 1)] = count
    return percentile_ranks(histogram)
