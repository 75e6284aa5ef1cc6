"""The hosted original's metric names for a page of accounts or users, beside today's fields:

- `score_yesterday`: yesterday's (UTC) point of the score history (engagement/history): the stored
  daily score, 0 when none is stored, None when the subject was first seen after yesterday;
- `score_last_period`: the score one lookback period ago (the score row's `previous_score`);
- `overall_scored_events`: every event ever counted in the daily rollups under an event name the
  workspace scores (weight above 0; an unlisted name weighs 1), without the daily cap;
- `recently_scored_events`: the events the score counts in the window (its breakdown's counts,
  daily cap applied).

An account's figures cover its descendants, like its score (engagement/hierarchy).

Read a page at a time: one query for yesterday's scores, one for the first seen of the page's
subjects without one (engagement/history.first_seen_days) and one sum over the rollups of the
page's ids, through the (product, user, ...) and (account, day) rollup indexes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Sum
from django.utils import timezone

from engagement.hierarchy import account_subtrees
from engagement.history import first_seen_days
from engagement.models import AccountScoreDay, EventRollup, EventWeight, UserScoreDay, Workspace


@dataclass(frozen=True, slots=True)
class PeriodFigures:
    score_yesterday: int | None
    overall_scored_events: int


def recently_scored_events(breakdown: list[dict]) -> int:
    """The events a score counted in its window: the sum of its breakdown's counts."""
    return sum(int(item.get("count") or 0) for item in breakdown)


def period_figures(
    *, workspace: Workspace, target: str, ids: Sequence[int]
) -> dict[int, PeriodFigures]:
    """Per account (`target` "account") or user id: yesterday's score and the scored events ever."""
    if not ids:
        return {}
    key = f"{target}_id"
    days = AccountScoreDay if target == "account" else UserScoreDay
    yesterday = timezone.now().date() - timedelta(days=1)
    scores = dict(
        days.objects.filter(
            workspace_id=workspace.id, day=yesterday, **{f"{key}__in": ids}
        ).values_list(key, "engagement_score")
    )
    # An account's events are its own and its descendants' (engagement/hierarchy).
    covered = account_subtrees(ids) if target == "account" else {i: {i} for i in ids}
    unscored = EventWeight.objects.filter(workspace_id=workspace.id, weight=0).values("event_name")
    events = dict(
        EventRollup.objects.filter(
            product_id=workspace.product_id, **{f"{key}__in": set().union(*covered.values())}
        )
        .exclude(event_name__in=unscored)
        .values(key)
        .annotate(total=Sum("count"))
        .values_list(key, "total")
    )
    # No stored point: 0 once the subject was first seen, None before, as the history reads it.
    missing = [subject_id for subject_id in ids if subject_id not in scores]
    seen = first_seen_days(target=target, ids=missing, subtrees=covered)
    for subject_id, first_seen in seen.items():
        if first_seen is not None and first_seen <= yesterday:
            scores[subject_id] = 0
    return {
        subject_id: PeriodFigures(
            scores.get(subject_id), sum(int(events.get(i) or 0) for i in covered[subject_id])
        )
        for subject_id in ids
    }
