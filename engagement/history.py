"""Score history: a daily point per user and account of a workspace, read and kept up to date.

The point of a past day D is the score as it stood at the end of D: the scoring formula applied
with D as "today", over the lookback window ending at D, normalised by that day's p90 of the
workspace (engagement/history_build.py computes it from the daily rollups). Stored days are
`UserScoreDay` / `AccountScoreDay` rows, one per subject and day whose score or raw score was not
zero; today's point is the live score row (`UserScore` / `AccountScore`), so the last point of a
history always equals what the read API serves now.

No history is invented: a past day before the subject was first seen has no point (None), rather
than a score of 0 (`first_seen_days`: a user's first event, an account's earliest first-seen user).

`score_history_update` fills the past in bulk for a workspace never built (or whose settings
changed), appends the days that ended since the last run, and recomputes every day from the
earliest one a batch of late or backdated events reached back to (`ScoreHistoryBackfill`, noted
by the apply path in the batch's transaction). The score refresh's beat queues a run as soon as
such a day is noted (`score_history_backfill_is_due`, every SCORING_REFRESH_SECONDS); the
history's own beat checks every minute for the rest (`score_history_is_due`).
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.models import Min
from django.utils import timezone

from engagement.hierarchy import account_subtrees
from engagement.history_build import HistoryBuilder
from engagement.models import (
    AccountScore,
    AccountScoreDay,
    Membership,
    ScoreHistoryBackfill,
    ScoreHistoryState,
    User,
    UserScore,
    UserScoreDay,
    Workspace,
)
from engagement.scoring import workspace_config_digest
from engagement.scoring.locks import workspace_state_held

logger = logging.getLogger(__name__)

# The longest history kept and served: points older than this many days (today included) are
# deleted by the daily step.
HISTORY_MAX_DAYS = 365
HISTORY_DEFAULT_DAYS = 30
# The noted days a run read are deleted by id, this many to a statement (SQLite's limit on
# parameters; a backlog of notes is one per batch applied while no run took them).
NOTES_DELETED_AT_ONCE = 1000
# Points older than HISTORY_MAX_DAYS are deleted once this many days have aged out, so the
# scan that finds them runs about monthly rather than daily.
PRUNE_SLACK = datetime.timedelta(days=30)


@dataclass(frozen=True)
class ScorePoint:
    date: datetime.date
    # None: a day before the subject was first seen, which has no score.
    engagement_score: int | None
    raw_score: float | None


@dataclass(frozen=True, slots=True)
class HistoryResult:
    workspace_id: int
    mode: str  # "rebuilt", "updated", "idle" (nothing to compute) or "busy" (another run holds it)
    first_day: datetime.date | None = None  # the days recomputed, inclusive
    last_day: datetime.date | None = None
    # Points written: all of them for new days, those that changed (or were deleted) for days
    # recomputed after late events.
    user_points: int = 0
    account_points: int = 0
    duration_ms: int = 0


def _utc_today(today: datetime.date | None) -> datetime.date:
    return today or timezone.now().astimezone(datetime.UTC).date()


def _check_days(days: int) -> None:
    if not 1 <= days <= HISTORY_MAX_DAYS:
        raise ValueError(f"days must be between 1 and {HISTORY_MAX_DAYS}, not {days}.")


def _series(
    *,
    stored: dict[datetime.date, tuple[int, float]],
    live: tuple[int, float],
    days: int,
    today: datetime.date,
    first_seen: datetime.date | None,
) -> list[ScorePoint]:
    """`days` points, oldest first, ending with today's live score. A day not stored is 0 from
    the day the subject was first seen, and None before it (or when it was never seen)."""
    points = []
    for offset in range(days - 1, 0, -1):
        day = today - datetime.timedelta(days=offset)
        seen = first_seen is not None and day >= first_seen
        score, raw = stored.get(day, (0, 0.0) if seen else (None, None))
        points.append(ScorePoint(date=day, engagement_score=score, raw_score=raw))
    points.append(ScorePoint(date=today, engagement_score=live[0], raw_score=live[1]))
    return points


def _score_history(
    day_model,
    score_model,
    subject: dict,
    *,
    days: int,
    today: datetime.date | None,
    first_seen: datetime.date | None,
) -> list[ScorePoint]:
    """Stored past days of one user or account (`subject`: its id and workspace), today live."""
    _check_days(days)
    today = _utc_today(today)
    first = today - datetime.timedelta(days=days - 1)
    rows = day_model.objects.filter(**subject, day__gte=first, day__lt=today).values_list(
        "day", "engagement_score", "raw_score"
    )
    live = score_model.objects.filter(**subject).values_list("engagement_score", "raw_score")
    return _series(
        stored={day: (score, raw) for day, score, raw in rows},
        live=live.first() or (0, 0.0),
        days=days,
        today=today,
        first_seen=first_seen,
    )


def _utc_day(moment: datetime.datetime | None) -> datetime.date | None:
    return None if moment is None else moment.astimezone(datetime.UTC).date()


def first_seen_days(
    *, target: str, ids: Sequence[int], subtrees: dict[int, set[int]] | None = None
) -> dict[int, datetime.date | None]:
    """The UTC day each user (`target` "user") or account of `ids` was first seen; None: never.

    A user's is the day of its first event (User.first_seen_at, the earliest event time the
    apply path stored, backdated events included). An account's is the earliest of the users its
    score is the mean of, its own and its descendants' (engagement/hierarchy `account_subtrees`,
    read here unless the caller has them as `subtrees`), as its tenure counts it. One query over
    the users or the memberships (none for no ids)."""
    if not ids:
        return {}
    if target == "user":
        seen = User.objects.filter(id__in=list(ids)).values_list("id", "first_seen_at")
        return {user_id: _utc_day(first) for user_id, first in seen}
    if subtrees is None:
        subtrees = account_subtrees(ids)
    subtrees = {account_id: subtrees[account_id] for account_id in ids}
    covered = set().union(*subtrees.values())
    earliest = dict(
        Membership.objects.filter(account_id__in=covered, user__first_seen_at__isnull=False)
        .values("account_id")
        .annotate(first=Min("user__first_seen_at"))
        .values_list("account_id", "first")
    )
    return {
        account_id: _utc_day(min((earliest[a] for a in accounts if a in earliest), default=None))
        for account_id, accounts in subtrees.items()
    }


def user_score_history(
    *,
    workspace_id: int,
    user_id: int,
    days: int = HISTORY_DEFAULT_DAYS,
    today: datetime.date | None = None,
) -> list[ScorePoint]:
    """The user's daily scores in the workspace over the last `days` UTC days, today last;
    None on the days before the user was first seen.

    The caller has scoped both ids to the reader's product."""
    subject = {"user_id": user_id, "workspace_id": workspace_id}
    first_seen = first_seen_days(target="user", ids=[user_id]).get(user_id)
    return _score_history(
        UserScoreDay, UserScore, subject, days=days, today=today, first_seen=first_seen
    )


def account_score_history(
    *,
    workspace_id: int,
    account_id: int,
    days: int = HISTORY_DEFAULT_DAYS,
    today: datetime.date | None = None,
) -> list[ScorePoint]:
    """The account's daily scores in the workspace over the last `days` UTC days, today last;
    None on the days before the account was first seen.

    The caller has scoped both ids to the reader's product."""
    subject = {"account_id": account_id, "workspace_id": workspace_id}
    first_seen = first_seen_days(target="account", ids=[account_id]).get(account_id)
    return _score_history(
        AccountScoreDay, AccountScore, subject, days=days, today=today, first_seen=first_seen
    )


def score_history_is_due(*, workspace: Workspace, now: datetime.datetime | None = None) -> bool:
    """Cheap check: the history was never built, a day ended since the last run, the settings
    changed, or late events noted a past day to recompute."""
    now = now or timezone.now()
    state = ScoreHistoryState.objects.filter(workspace_id=workspace.id).first()
    if state is None or state.built_through is None:
        return True
    if state.built_through < now.astimezone(datetime.UTC).date() - datetime.timedelta(days=1):
        return True
    if state.config_digest != workspace_config_digest(workspace=workspace):
        return True
    return score_history_backfill_is_due(workspace_id=workspace.id, now=now)


def score_history_backfill_workspaces() -> list[int]:
    """The workspaces where late events noted a past day (one query, for beat's sweep)."""
    return sorted(set(ScoreHistoryBackfill.objects.values_list("workspace_id", flat=True)))


def score_history_backfill_is_due(
    *, workspace_id: int, now: datetime.datetime | None = None
) -> bool:
    """Whether late events noted a past day whose stored points no run has recomputed yet (an
    indexed EXISTS, cheap enough for every score refresh tick).

    An import of past events notes a day with every batch, for minutes on end: after such a
    recompute that took longer than a refresh period, the next waits as long again after it
    ended, so recomputing takes at most half of a worker while the import lasts. (A late event
    after a daily step or a rebuild is recomputed at once.)"""
    if not ScoreHistoryBackfill.objects.filter(workspace_id=workspace_id).exists():
        return False
    state = ScoreHistoryState.objects.filter(workspace_id=workspace_id).first()
    if state is None or state.checked_through is None:
        return True
    last_run = datetime.timedelta(milliseconds=state.last_backfill_ms)
    if last_run <= datetime.timedelta(seconds=settings.SCORING_REFRESH_SECONDS):
        return True
    return (now or timezone.now()) >= state.checked_through + 2 * last_run


def _needs_rebuild(state: ScoreHistoryState, *, horizon: datetime.date, digest: str) -> bool:
    """Build the whole history: never built, stopped short of the horizon, or new settings."""
    return (
        state.built_through is None
        or state.built_through < horizon
        or state.config_digest != digest
    )


def _days_build(
    workspace: Workspace,
    first: datetime.date,
    last: datetime.date,
    stored_until: datetime.date | None,
    *,
    own_transaction: bool,
) -> tuple[int, int]:
    """Compute and store days first..last (none when first is after last); returns the user
    and account points written."""
    if first > last:
        return 0, 0
    builder = HistoryBuilder(
        workspace=workspace,
        first=first,
        last=last,
        stored_until=stored_until,
        own_transaction=own_transaction,
    )
    try:
        return builder.build()
    finally:
        builder.close()


def score_history_update(
    *, workspace_id: int, now: datetime.datetime | None = None
) -> HistoryResult:
    """Bring the workspace's stored history up to yesterday.

    In full (the past HISTORY_MAX_DAYS days) when it was never built or the settings changed;
    otherwise the days that ended since the last run, and every day from the earliest one that
    late events noted (ScoreHistoryBackfill), each of those days for every user and account (the
    day's p90 ties their scores together). Only the points that differ from the stored ones are
    written. One transaction holding the workspace's ScoreHistoryState row: a second run returns
    "busy" at once, and the noted days it read are deleted with its commit.
    """
    now = now or timezone.now()
    started = time.monotonic()
    own_transaction = not connection.in_atomic_block
    with workspace_state_held(ScoreHistoryState, workspace_id) as state:
        if state is None:
            return HistoryResult(workspace_id=workspace_id, mode="busy")
        result = _update_held(
            state,
            workspace_id=workspace_id,
            now=now,
            started=started,
            own_transaction=own_transaction,
        )
    _log_update(result)
    return result


def _update_held(
    state: ScoreHistoryState,
    *,
    workspace_id: int,
    now: datetime.datetime,
    started: float,
    own_transaction: bool,
) -> HistoryResult:
    """The update itself, inside the transaction holding `state` (the workspace's
    ScoreHistoryState row); `started` is the run's time.monotonic() at its start, and
    `own_transaction` whether that transaction is its caller's outermost."""
    today = now.astimezone(datetime.UTC).date()
    yesterday = today - datetime.timedelta(days=1)
    horizon = today - datetime.timedelta(days=HISTORY_MAX_DAYS - 1)
    # Read before any rollup: each noted day's events committed before its note did.
    noted = _noted_days(workspace_id)
    workspace = Workspace.objects.get(id=workspace_id)
    digest = workspace_config_digest(workspace=workspace)
    rebuild = _needs_rebuild(state, horizon=horizon, digest=digest)
    first, stored_until = _days_to_build(
        state, rebuild=rebuild, horizon=horizon, noted=noted.values()
    )
    user_points, account_points = _days_build(
        workspace, first, yesterday, stored_until, own_transaction=own_transaction
    )
    _prune_aged_points(state, workspace_id=workspace_id, horizon=horizon)
    _notes_delete(sorted(noted))
    duration_ms = int((time.monotonic() - started) * 1000)
    _state_record(
        state,
        now=now,
        yesterday=yesterday,
        digest=digest,
        days=max(0, (yesterday - first).days + 1),
        ms=duration_ms,
        backfill=stored_until is not None,
    )
    built = first <= yesterday
    return HistoryResult(
        workspace_id=workspace_id,
        mode="rebuilt" if rebuild else ("updated" if built else "idle"),
        first_day=first if built else None,
        last_day=yesterday if built else None,
        user_points=user_points,
        account_points=account_points,
        duration_ms=duration_ms,
    )


def _log_update(result: HistoryResult) -> None:
    """One line per update that held the workspace (a "busy" run logs none)."""
    days = 0  # an idle run computed no day
    if result.first_day is not None and result.last_day is not None:
        days = (result.last_day - result.first_day).days + 1
    logger.info(
        "score history %s workspace=%s days=%s users=%s accounts=%s in %s ms",
        result.mode,
        result.workspace_id,
        days,
        result.user_points,
        result.account_points,
        result.duration_ms,
    )


def _noted_days(workspace_id: int) -> dict[int, datetime.date]:
    """The days late events noted for the workspace to recompute from, by note id."""
    return dict(
        ScoreHistoryBackfill.objects.filter(workspace_id=workspace_id).values_list("id", "from_day")
    )


def _prune_aged_points(
    state: ScoreHistoryState, *, workspace_id: int, horizon: datetime.date
) -> None:
    """Delete the points before the horizon once PRUNE_SLACK days of them have aged out."""
    if state.built_from is not None and state.built_from < horizon - PRUNE_SLACK:
        _delete_points(workspace_id=workspace_id, before_day=horizon)
        state.built_from = horizon


def _days_to_build(
    state: ScoreHistoryState,
    *,
    rebuild: bool,
    horizon: datetime.date,
    noted: Iterable[datetime.date],
) -> tuple[datetime.date, datetime.date | None]:
    """The first day to build and, for a backfill, the last day that already holds points to
    compare with (None: every point is new). A rebuild starts over from the horizon."""
    built_through = state.built_through
    if rebuild or built_through is None:  # never built: _needs_rebuild says rebuild
        _delete_points(workspace_id=state.workspace_id)
        state.built_from = horizon
        return horizon, None
    first = built_through + datetime.timedelta(days=1)
    backfilled = min(noted, default=None)
    if backfilled is not None and backfilled < first:
        return max(backfilled, state.built_from or horizon), built_through
    return first, None


def _state_record(
    state: ScoreHistoryState,
    *,
    now: datetime.datetime,
    yesterday: datetime.date,
    digest: str,
    days: int,
    ms: int,
    backfill: bool,
) -> None:
    state.built_through = yesterday
    state.config_digest = digest
    if days:
        # An idle run (the tick queued it while another ran) keeps the last run's figures.
        state.checked_through = now
        state.last_run_ms = ms
        state.last_days = days
        state.last_backfill_ms = ms if backfill else 0
    state.save()


def _notes_delete(ids: list[int]) -> None:
    """Delete the noted days a run has covered, by id: one noted since it read them stays."""
    for start in range(0, len(ids), NOTES_DELETED_AT_ONCE):
        ScoreHistoryBackfill.objects.filter(
            id__in=ids[start : start + NOTES_DELETED_AT_ONCE]
        ).delete()


def _delete_points(
    *,
    workspace_id: int,
    before_day: datetime.date | None = None,
) -> None:
    """Delete the workspace's stored points: all, or those before a day."""
    where = "workspace_id = %s"
    params: list[int | str | None] = [workspace_id]
    if before_day is not None:
        where += " AND day < %s"
        params.append(connection.ops.adapt_datefield_value(before_day))
    with connection.cursor() as cursor:
        for table in ("engagement_userscoreday", "engagement_accountscoreday"):
            cursor.execute(f"DELETE FROM {table} WHERE {where}", params)  # noqa: S608
