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

from django.db.models import TextField
from django.db.models.functions import Cast
from django.utils import timezone

from engagement.hierarchy import account_subtrees
from engagement.input_rules import at, key_path, text_fault
from engagement.models import EventRollup, Feature, Workspace
from engagement.stored_json import json_for_reading

NAME_MAX = 200
EVENT_MAX = 255


@dataclass(frozen=True, slots=True)
class FeatureUse:
    feature: str
    used: bool


def features_faults(features: object, *, path: str = "features") -> list[str]:
    """Every fault of a {"feature name": ["event name", ...]} mapping, each after its path
    (`features.Reporting[1]: ...`), or [] when it can be stored."""
    if not isinstance(features, dict):
        return [at(path, 'an object {"feature name": ["event name", ...]}')]
    faults: list[str] = []
    owner: dict[str, str] = {}
    for name, events in features.items():
        where = key_path(path, name)
        if fault := text_fault(name, max_length=NAME_MAX, what="a feature name"):
            faults.append(at(where, fault))
        if not isinstance(events, list) or not events:
            faults.append(at(where, "a list of at least one event name"))
            continue
        for position, event in enumerate(events):
            here = f"{where}[{position}]"
            if fault := text_fault(event, max_length=EVENT_MAX, what="an event name"):
                faults.append(at(here, fault))
            elif event in owner:
                first = owner[event]
                listed = "twice" if first == name else f"in {first!r} too"
                faults.append(
                    at(here, f"{event!r} is listed {listed}; an event belongs to one feature")
                )
            else:
                owner[event] = name
    return faults


def workspace_features(*, workspace_id: int) -> dict[str, list[str]]:
    """The workspace's features, in the order they were created. The events are read as reads
    read stored JSON (engagement.stored_json), and events stored past features_faults that are
    not a list read as none: a score refresh reads this, and no stored value may stop it."""
    features = Feature.objects.filter(workspace_id=workspace_id).order_by("id")
    return {
        name: list(events) if isinstance(events, list) else []
        for name, events in (
            (name, json_for_reading(text))
            for name, text in features.values_list("name", Cast("events", TextField()))
        )
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
