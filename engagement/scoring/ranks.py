"""Normalisation after scores are written: p90 of the raw scores (now and one period earlier),
the re-normalisation of rows whose rounded score moves with it, and percentile ranks, in one pass
over the workspace or, after an incremental refresh, from the kept per-score histograms."""

# ruff: noqa: S608

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from engagement.models import ScoringState
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


def update_ranks(run: ScoringRun, table: str) -> None:
    """percentile_rank = 100 * (active rows scoring lower) / (active rows - 1), to one decimal,
    among the rows scoring above 0; NULL for a score of 0 (Dialect.percentile_rank).

    It depends only on a row's score and the workspace's score histogram, so one pass
    over the histogram rewrites only the rows whose rank moved.
    """
    rank = run.sql.percentile_rank()
    # A histogram of at most 101 scores: hashing is the right plan here.
    with run.hash_aggregation(allowed=True):
        run.run(
            f"""
            UPDATE {table} SET percentile_rank = r.pr
            FROM (
                SELECT s, {rank} AS pr FROM (
                    SELECT engagement_score AS s, COUNT(*) AS c FROM {table}
                    WHERE workspace_id = %(ws)s GROUP BY engagement_score) h
            ) r
            WHERE {table}.workspace_id = %(ws)s AND {table}.engagement_score = r.s
            AND {run.sql.differs(f"{table}.percentile_rank", "r.pr")}
            """
        )


def update_moved_ranks(
    run: ScoringRun, table: str, *, key: str, touched: str, before: list[int], after: list[int]
) -> None:
    """update_ranks after an incremental refresh, from the kept histograms (rows per score)
    before and after it instead of a pass over every row: the rows of the scores whose rank
    moved, and the `touched` rows (a SELECT of `key`: those the refresh wrote) whose score did.

    The other rows hold their score's rank from the last refresh, unchanged.
    """
    rank = run.sql.percentile_rank()

    def ranked(histogram: list[int]) -> str:
        counted = enumerate(histogram)
        rows = ", ".join(f"({score}, {int(count)})" for score, count in counted if count)
        return (
            f"SELECT s, {rank} AS pr FROM (SELECT column1 AS s, column2 AS c "
            f"FROM (VALUES {rows or '(0, 0)'}) v) h"
        )

    run.temp("eds_t_rank", "s INTEGER PRIMARY KEY, pr FLOAT, moved INTEGER")
    # A score new to the histogram (no `b` row) moved; a score of 0 has no rank before or after.
    moved = f"b.s IS NULL OR {run.sql.differs('b.pr', 'a.pr')}"
    run.run(
        f"""
        INSERT INTO eds_t_rank (s, pr, moved)
        SELECT a.s, a.pr, CASE WHEN {moved} THEN 1 ELSE 0 END
        FROM ({ranked(after)}) a LEFT JOIN ({ranked(before)}) b ON b.s = a.s
        """
    )
    run.analyze("eds_t_rank")
    for rows in ("r.moved = 1", f"{table}.{key} IN ({touched})"):
        run.run(
            f"""
            UPDATE {table} SET percentile_rank = r.pr FROM eds_t_rank r
            WHERE {table}.workspace_id = %(ws)s AND {table}.engagement_score = r.s
            AND {rows} AND {run.sql.differs(f"{table}.percentile_rank", "r.pr")}
            """
        )
