"""A workspace's features: named groups of event names, each name in at most one feature.

With features defined, a score's `adoption` is the share of the workspace's features used in
the window (any event of the feature sent, whatever its weight); without them it stays the
share of weighted event names used (docs/scoring.md). The engine computes adoption in the
refresh (engagement/scoring/aggregation.py); which features a record used is read here a page
at a time, from the daily rollups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from django.utils import timezone

from engagement.hierarchy import account_subtrees
from engagement.models import EventRollup, Feature, Workspace

NAME_MAX = 200
EVENT_MAX = 255


@dataclass(frozen=True, slots=True)
class FeatureUse:
    feature: str
    used: bool


def features_faults(features: object) -> list[str]:
    """Every fault of a {"feature name": ["event", ...]} mapping, or [] when it can be stored."""
    if not isinstance(features, dict):
        return ['features: an object {"feature name": ["event name", ...]}.']
    faults: list[str] = []
    owner: dict[str, str] = {}
    for name, events in features.items():
        if not name.strip() or len(name) > NAME_MAX:
            faults.append(f"features: a feature name of 1 to {NAME_MAX} characters.")
        if not isinstance(events, list) or not events:
            faults.append(f"features: {name!r} needs a list of at least one event name.")
            continue
        for event in events:
            if not isinstance(event, str) or not event or len(event) > EVENT_MAX:
                faults.append(f"features: {name!r} lists an event name not of 1 to 255 characters.")
            elif event in owner:
                first = owner[event]
                where = "twice" if first == name else f"in {first!r} too"
                faults.append(
                    f"features: event {event!r} is listed {where}; an event belongs to one feature."
                )
            else:
                owner[event] = name
    return faults


def workspace_features(*, workspace_id: int) -> dict[str, list[str]]:
    """The workspace's features, in the order they were created."""
    return {
        name: list(events)
        for name, events in Feature.objects.filter(workspace_id=workspace_id)
        .order_by("id")
        .values_list("name", "events")
    }


def features_replace(*, workspace: Workspace, features: dict[str, list[str]]) -> None:
    """Store exactly these features (the caller checked features_faults), keeping their order."""
    Feature.objects.filter(workspace=workspace).delete()
    Feature.objects.bulk_create(
        [Feature(workspace=workspace, name=name, events=list(ev)) for name, ev in features.items()]
    )


def features_used(
    *, workspace: Workspace, target: str, ids: Sequence[int], today: date | None = None
) -> dict[int, list[FeatureUse]]:
    """Per account (`target` "account": the events attributed to it) or user id: each feature of
    the workspace and whether any of its events was sent in the scoring window."""
    # Imported here: the scoring package reads this module's workspace_features.
    from engagement.scoring.formula import scoring_window

    window = scoring_window(
        lookback_days=workspace.lookback_days, today=today or timezone.now().date()
    )
    features = workspace_features(workspace_id=workspace.id)
    if not ids or not features:
        return {subject_id: [] for subject_id in ids}
    feature_of = {event: name for name, events in features.items() for event in events}
    key = f"{target}_id"
    # An account's events are its own and its descendants' (engagement/hierarchy).
    covered = account_subtrees(ids) if target == "account" else {i: {i} for i in ids}
    sent = (
        EventRollup.objects.filter(
            product_id=workspace.product_id,
            event_name__in=list(feature_of),
            day__gte=window.start,
            day__lte=window.end,
            **{f"{key}__in": set().union(*covered.values())},
        )
        .values_list(key, "event_name")
        .distinct()
    )
    used_by: dict[int, set[str]] = {}
    for sender, event in sent:
        used_by.setdefault(sender, set()).add(feature_of[event])
    used = {i: set().union(*(used_by.get(s, set()) for s in covered[i])) for i in ids}
    return {
        subject_id: [FeatureUse(name, name in used[subject_id]) for name in features]
        for subject_id in ids
    }
