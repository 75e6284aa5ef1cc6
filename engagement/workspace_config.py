"""A workspace as code: its whole configuration as one JSON document, read and applied whole.

    {"name", "lookback_days", "daily_event_cap", "account_filter",
     "weights": {event: 0-10}, "features": {name: [events]},
     "activation": {"users": [steps], "accounts": [steps]},
     "segments": [{"name", "target", "match", "conditions"}]}

Applying a document checks every part first, with the rules every surface uses
(engagement/input_rules, engagement/segment_conditions), and lists every fault after the path of
its value (`weights.Report_Created: ...`, `segments[0].conditions[2].value: ...`, list positions
from 0); nothing changes unless all of it is valid, and then all of it changes in one
transaction: the settings, the weights (a name left out weighs 1 again), the features and
activation steps (replaced whole) and the segments, matched by name (a segment left out is
deleted, a new name is created, built-in segments keep that mark). What is read after an apply
equals what was applied (segments are listed built-in first, then in the order they were
created). The workspace is rescored and its segments refreshed once it commits.
"""

from __future__ import annotations

from typing import cast

from django.core.exceptions import ValidationError
from django.db import transaction

from engagement.activation import activation_faults, activation_replace, workspace_activation
from engagement.features import features_faults, features_replace, workspace_features
from engagement.input_rules import (
    MAX_CONDITIONS,
    at,
    is_whole,
    key_path,
    plain_value_fault,
    text_fault,
    whole_fault,
)
from engagement.models import EventWeight, Segment, Workspace
from engagement.segment_conditions import segment_conditions_faults

DOCUMENT_KEYS = (
    "name",
    "lookback_days",
    "daily_event_cap",
    "account_filter",
    "weights",
    "features",
    "activation",
    "segments",
)
SEGMENT_KEYS = ("name", "target", "match", "conditions")
LOOKBACKS = tuple(Workspace.Lookback.values)
# The model's max_length of a workspace's and a segment's name, of an event name, and the
# ingestion door's of a trait name.
NAME_MAX = 200
EVENT_NAME_MAX = 255
TRAIT_NAME_MAX = 255
MAX_WEIGHT = 10


def workspace_config_get(*, workspace: Workspace) -> dict:
    """The workspace's configuration document (weights by name; segments built-in first)."""
    weights = workspace.weights.order_by("event_name").values_list("event_name", "weight")
    segments = workspace.segments.order_by("-builtin", "id")
    return {
        "name": workspace.name,
        "lookback_days": workspace.lookback_days,
        "daily_event_cap": workspace.daily_event_cap,
        "account_filter": workspace.account_filter,
        "weights": dict(weights),
        "features": workspace_features(workspace_id=workspace.id),
        "activation": workspace_activation(workspace_id=workspace.id),
        "segments": [
            {
                "name": segment.name,
                "target": segment.target,
                "match": segment.match,
                "conditions": segment.conditions,
            }
            for segment in segments
        ],
    }


def account_filter_faults(value: object, *, path: str = "account_filter") -> list[str]:
    """Every fault of an account filter ({"trait": text, number, true/false or null}, at most
    50 traits), each after its path (`account_filter.plan: ...`), or []."""
    if not isinstance(value, dict):
        return [at(path, 'an object {"trait": value, ...}')]
    if len(value) > MAX_CONDITIONS:
        return [at(path, f"at most {MAX_CONDITIONS} traits (this filter has {len(value)})")]
    faults = []
    for key, expected in value.items():
        where = key_path(path, key)
        if fault := text_fault(key, max_length=TRAIT_NAME_MAX, what="a trait name"):
            faults.append(at(where, fault))
        if expected is not None and (fault := plain_value_fault(expected)):
            faults.append(at(where, fault))
    return faults


def name_fault(name: object) -> str | None:
    """The fault of a workspace's or a segment's name, or None."""
    return text_fault(name, max_length=NAME_MAX)


def daily_event_cap_fault(cap: object) -> str | None:
    """The fault of a daily event cap (a whole number of at least 1, or None), or None."""
    fault = None if cap is None else whole_fault(cap, least=1)
    return f"{fault}, or null for no cap" if fault else None


def weight_fault(weight: object) -> str | None:
    """The fault of an event's weight (a whole number from 0 to 10), or None."""
    return whole_fault(weight, most=MAX_WEIGHT)


def event_name_fault(name: object) -> str | None:
    """The fault of the event name a weight is for, or None."""
    return text_fault(name, max_length=EVENT_NAME_MAX, what="an event name")


def workspace_config_faults(document: object) -> list[str]:
    """Every fault of a configuration document, each after its path (`weights.Login: ...`,
    `segments[0].conditions[2].value: ...`), or [] when it can be applied."""
    if not isinstance(document, dict):
        return [f"The configuration must be a JSON object: {', '.join(DOCUMENT_KEYS)}."]
    faults = [
        at(key_path("", key), "not a key of the document")
        for key in document
        if key not in DOCUMENT_KEYS
    ]
    faults += [
        at(key, "missing; every key is required") for key in DOCUMENT_KEYS if key not in document
    ]
    if "name" in document and (fault := name_fault(document["name"])):
        faults.append(at("name", fault))
    lookback = document.get("lookback_days")
    if "lookback_days" in document and not (is_whole(lookback) and lookback in LOOKBACKS):
        faults.append(at("lookback_days", f"one of {', '.join(map(str, LOOKBACKS))} (days)"))
    if fault := daily_event_cap_fault(document.get("daily_event_cap")):
        faults.append(at("daily_event_cap", fault))
    if "account_filter" in document:
        faults += account_filter_faults(document["account_filter"])
    if "weights" in document:
        faults += _weight_faults(document["weights"])
    if "features" in document:
        faults += features_faults(document["features"])
    if "activation" in document:
        faults += activation_faults(document["activation"])
    if "segments" in document:
        faults += _segment_faults(document["segments"])
    return faults


def _weight_faults(weights: object) -> list[str]:
    if not isinstance(weights, dict):
        return [at("weights", 'an object {"event name": 0-10}')]
    faults = []
    for event, weight in weights.items():
        where = key_path("weights", event)
        if fault := event_name_fault(event):
            faults.append(at(where, fault))
        if fault := weight_fault(weight):
            faults.append(at(where, fault))
    return faults


def _segment_faults(segments: object) -> list[str]:
    if not isinstance(segments, list):
        return [at("segments", "a list of {name, target, match, conditions} objects")]
    faults, seen = [], set()
    for position, segment in enumerate(segments):
        where = f"segments[{position}]"
        if not isinstance(segment, dict):
            faults.append(at(where, f"an object with {', '.join(SEGMENT_KEYS)}"))
            continue
        faults += [
            at(key_path(where, key), f"not a key of a segment; one of {', '.join(SEGMENT_KEYS)}")
            for key in segment
            if key not in SEGMENT_KEYS
        ]
        name = segment.get("name")
        if fault := name_fault(name):
            faults.append(at(f"{where}.name", fault))
        elif name in seen:
            faults.append(at(f"{where}.name", f"a second segment named {name!r}"))
        else:
            seen.add(name)
        if segment.get("match", Segment.Match.ALL) not in Segment.Match.values:
            faults.append(at(f"{where}.match", f"one of {', '.join(Segment.Match.values)}"))
        target = segment.get("target", Segment.Target.ACCOUNTS)
        if target not in Segment.Target.values:
            faults.append(at(f"{where}.target", f"one of {', '.join(Segment.Target.values)}"))
            continue  # which conditions are valid depends on the target
        faults += segment_conditions_faults(
            target=target, conditions=segment.get("conditions", []), path=f"{where}.conditions"
        )
    return faults


def workspace_config_apply(*, workspace_id: int, document: object) -> dict:
    """Apply a whole configuration document, or raise ValidationError listing every fault and
    change nothing; returns the configuration as it now reads."""
    faults = workspace_config_faults(document)
    if faults:
        raise ValidationError(faults)
    document = cast(dict, document)  # without faults, a configuration object
    with transaction.atomic():
        workspace = Workspace.objects.select_for_update().get(id=workspace_id)
        for field in ("name", "lookback_days", "daily_event_cap", "account_filter"):
            setattr(workspace, field, document[field])
        workspace.save()
        _weights_replace(workspace, document["weights"])
        features_replace(workspace=workspace, features=document["features"])
        activation_replace(workspace=workspace, activation=document["activation"])
        _segments_replace(workspace, document["segments"])
        from engagement.tasks import workspace_rescore

        transaction.on_commit(lambda: workspace_rescore.delay(workspace_id))
        return workspace_config_get(workspace=workspace)


def _weights_replace(workspace: Workspace, weights: dict[str, int]) -> None:
    workspace.weights.exclude(event_name__in=list(weights)).delete()
    EventWeight.objects.bulk_create(
        [EventWeight(workspace=workspace, event_name=e, weight=w) for e, w in weights.items()],
        update_conflicts=True,
        unique_fields=["workspace", "event_name"],
        update_fields=["weight"],
    )


def _segments_replace(workspace: Workspace, segments: list[dict]) -> None:
    existing = {segment.name: segment for segment in workspace.segments.all()}
    wanted = {segment["name"] for segment in segments}
    workspace.segments.exclude(name__in=wanted).delete()
    for given in segments:
        segment = existing.get(given["name"]) or Segment(workspace=workspace, name=given["name"])
        segment.target = given.get("target", Segment.Target.ACCOUNTS)
        segment.match = given.get("match", Segment.Match.ALL)
        segment.conditions = given.get("conditions", [])
        segment.save()
