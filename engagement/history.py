"""Score history: a daily point per user and account of a workspace, read and kept up to date.

The point of a past day D is the score as it stood at the end of D: the scoring formula applied
with D as "today", over the lookback window ending at D, normalised by that day's p90 of the
workspace (engagement/history_build.py computes it from the daily rollups). Stored days are
`UserScoreDay` / `AccountScoreDay` rows, one per subject and day whose score or raw score was not
zero; today's point is the live score row (`UserScore` / `AccountScore`), so the last point of a
history always equals what the read API serves now.

`score_history_update` fills the past in bulk for a workspace never built (or whose settings
changed), appends the days that ended since the last run, and recomputes the days whose rollups
changed since (a backfill of past events). The beat checks every minute whether a workspace is
due (`score_history_is_due`).
"""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from engagement.models import (
    AccountScore,
    AccountScoreDay,
    EventRollup,
    ScoreHistoryState,
    UserScore,
    UserScoreDay,
    Workspace,
)
from engagement.scoring import workspace_config_digest

logger = logging.getLogger(__name__)

# The longest history kept and served: points older than this many days (today included) are
# deleted by the daily step.
HISTORY_MAX_DAYS = 365
HISTORY_DEFAULT_DAYS = 30
# How often, at most, a run looks for rollups of past days changed by a backfill (a scan of
# the product's rollups changed since the last look).
BACKFILL_CHECK_SECONDS = 3600


@dataclass(frozen=True)
class ScorePoint:
    date: datetime.date
    engagement_score: int
    raw_score: float


@dataclass(frozen=True, slots=True)
class HistoryResult:
    workspace_id: int
    mode: str  # "rebuilt", "updated", "idle" (nothing to compute) or "busy" (another run holds it)
    first_day: datetime.date | None = None  # the days recomputed, inclusive
    last_day: datetime.date | None = None
    user_points: int = 0
    account_points: int = 0
    duration_ms: int = 0


def _utc_today(today: datetime.date | None) -> datetime.date:
    return today or timezone.now().astimezone(datetime.UTC).date()


def _check_days(days: int) -> None:
    if not 1 <= days <= HISTORY_MAX_DAYS:
        raise ValueError(f"days must be between 1 and {HISTORY_MAX_DAYS}, not {days}.")


def _series(
    *, stored: dict[datetime.date, tuple[int, float]], live: tuple[int, float], days: int,
    today: datetime.date,
) -> list[ScorePoint]:
    """`days` points, oldest first, ending with today's live score; a day not stored is 0."""
    points = []
    for offset in range(days - 1, 0, -1):
        day = today - datetime.timedelta(days=offset)
        score, raw = stored.get(day, (0, 0.0))
        points.append(ScorePoint(date=day, engagement_score=score, raw_score=raw))
    points.append(ScorePoint(date=today, engagement_score=live[0], raw_score=live[1]))
    return points


def user_score_history(
    *, workspace_id: int, user_id: int, days: int = HISTORY_DEFAULT_DAYS,
    today: datetime.date | None = None,
) -> list[ScorePoint]:
    """The user's daily scores in the workspace over the last `days` UTC days, today last.

    The caller has scoped both ids to the reader's product."""
    _check_days(days)
    today = _utc_today(today)
    first = today - datetime.timedelta(days=days - 1)
    rows = UserScoreDay.objects.filter(
        user_id=user_id, workspace_id=workspace_id, day__gte=first, day__lt=today
    ).values_list("day", "engagement_score", "raw_score")
    live = (
        UserScore.objects.filter(user_id=user_id, workspace_id=workspace_id)
        .values_list("engagement_score", "raw_score")
        .first()
    )
    return _series(
        stored={day: (score, raw) for day, score, raw in rows},
        live=live or (0, 0.0),
        days=days,
        today=today,
    )


def account_score_history(
    *, workspace_id: int, account_id: int, days: int = HISTORY_DEFAULT_DAYS,
    today: datetime.date | None = None,
) -> list[ScorePoint]:
    """The account's daily scores in the workspace over the last `days` UTC days, today last.

    The caller has scoped both ids to the reader's product."""
    _check_days(days)
    today = _utc_today(today)
    first = today - datetime.timedelta(days=days - 1)
    rows = AccountScoreDay.objects.filter(
        account_id=account_id, workspace_id=workspace_id, day__gte=first, day__lt=today
    ).values_list("day", "engagement_score", "raw_score")
    live = (
        AccountScore.objects.filter(account_id=account_id, workspace_id=workspace_id)
        .values_list("engagement_score", "raw_score")
        .first()
    )
    return _series(
        stored={day: (score, raw) for day, score, raw in rows},
        live=live or (0, 0.0),
        days=days,
        today=today,
    )
