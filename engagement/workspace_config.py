"""A workspace as code: its whole configuration as one JSON document, read and applied whole.

    {"name", "lookback_days", "daily_event_cap", "account_filter",
     "weights": {event: 0-10}, "features": {name: [events]},
     "activation": {"users": [steps], "accounts": [steps]},
     "segments": [{"name", "target", "match", "conditions"}]}

Applying a document checks every part first and lists every fault; nothing changes unless all
of it is valid, and then all of it changes in one transaction: the settings, the weights (a
name left out weighs 1 again), the features and activation steps (replaced whole) and the
segments, matched by name (a segment left out is deleted, a new name is created, built-in
segments keep that mark). What is read after an apply equals
what was applied (segments are listed built-in first, then in the order they were created).
The workspace is rescored and its segments refreshed once it commits.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from engagement.activation import activation_faults, activation_replace, workspace_activation
from engagement.features import features_faults, features_replace, workspace_features
from engagement.models import EventWeight, Segment, Workspace
from engagement.segment_conditions import segment_conditions_validate

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


def account_filter_faults(value: object) -> list[str]:
    """What is wrong with an account filter ({"trait": text, number, true/false or null})."""
    if not isinstance(value, dict):
        return ['The account filter must be an object: {"trait": value, ...}.']
    faults = []
    for key, expected in value.items():
        if not key:
            faults.append("The account filter has an empty trait name.")
        elif isinstance(expected, dict | list):
            faults.append(
                f"Filter on {key!r}: compare with a text, number, true/false or null value."
            )
    return faults


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def workspace_config_faults(document: object) -> list[str]:
    """Every fault of a configuration document, or [] when it can be applied."""
    if not isinstance(document, dict):
        return ["The configuration must be a JSON object."]
    faults = [f"Unknown key {key!r}." for key in document if key not in DOCUMENT_KEYS]
    faults += [f"Missing key {key!r}." for key in DOCUMENT_KEYS if key not in document]
    name = document.get("name")
    if "name" in document and not (isinstance(name, str) and name.strip() and len(name) <= 200):
        faults.append("name: a non-empty text of at most 200 characters.")
    if "lookback_days" in document and document["lookback_days"] not in Workspace.Lookback.values:
        faults.append(f"lookback_days: one of {Workspace.Lookback.values}.")
    cap = document.get("daily_event_cap")
    if cap is not None and not (_whole(cap) and cap >= 1):
        faults.append("daily_event_cap: a whole number of at least 1, or null for no cap.")
    if "account_filter" in document:
        filter_faults = account_filter_faults(document["account_filter"])
        faults += [f"account_filter: {fault}" for fault in filter_faults]
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
        return ['weights: an object {"event name": 0-10}.']
    faults = []
    for event, weight in weights.items():
        if not event or len(event) > 255:
            faults.append("weights: an event name of 1 to 255 characters.")
        if not (_whole(weight) and 0 <= weight <= 10):
            faults.append(f"weights: {event!r} must weigh a whole number from 0 to 10.")
    return faults


def _segment_faults(segments: object) -> list[str]:
    if not isinstance(segments, list):
        return ["segments: a list of {name, target, match, conditions}."]
    faults, seen = [], set()
    for number, segment in enumerate(segments, start=1):
        where = f"segments[{number}]"
        if not isinstance(segment, dict):
            faults.append(f"{where}: an object with {', '.join(SEGMENT_KEYS)}.")
            continue
        faults += [f"{where}: unknown key {key!r}." for key in segment if key not in SEGMENT_KEYS]
        name = segment.get("name")
        if not (isinstance(name, str) and name.strip() and len(name) <= 200):
            faults.append(f"{where}: name must be a non-empty text of at most 200 characters.")
        elif name in seen:
            faults.append(f"{where}: a second segment named {name!r}.")
        else:
            seen.add(name)
        target = segment.get("target", Segment.Target.ACCOUNTS)
        if target not in Segment.Target.values:
            faults.append(f"{where}: target must be one of {Segment.Target.values}.")
            continue
        if segment.get("match", Segment.Match.ALL) not in Segment.Match.values:
            faults.append(f"{where}: match must be one of {Segment.Match.values}.")
        try:
            segment_conditions_validate(target=target, conditions=segment.get("conditions", []))
        except ValidationError as invalid:
            faults += [f"{where}: {message}" for message in invalid.messages]
    return faults


def workspace_config_apply(*, workspace_id: int, document: object) -> dict:
    """Apply a whole configuration document, or raise ValidationError listing every fault and
    change nothing; returns the configuration as it now reads."""
    faults = workspace_config_faults(document)
    if faults:
        raise ValidationError(faults)
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
