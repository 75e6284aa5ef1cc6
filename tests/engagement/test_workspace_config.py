"""python manage.py workspace_config --workspace ID [--apply]: a workspace as code."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from engagement.builtin_segments import BUILTIN_SEGMENTS
from engagement.models import EventWeight, Segment
from engagement.workspace_config import workspace_config_get

pytestmark = pytest.mark.both_databases


def printed(workspace, stdin=None, monkeypatch=None) -> dict:
    out = io.StringIO()
    args = ["workspace_config", "--workspace", str(workspace.id)]
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        args.append("--apply")
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def test_a_new_workspace_prints_its_defaults_and_built_in_segments(acme):
    config = printed(acme.workspace)
    assert {k: v for k, v in config.items() if k != "segments"} == {
        "name": "Default",
        "lookback_days": 30,
        "daily_event_cap": None,
        "account_filter": {},
        "weights": {},
        "features": {},
        "activation": {"users": [], "accounts": []},
    }
    assert [s["name"] for s in config["segments"]] == [name for name, _ in BUILTIN_SEGMENTS]
    assert config["segments"][0] == {
        "name": "Score 75 and over",
        "target": "accounts",
        "match": "all",
        "conditions": [
            {"field": "metric:engagement_score", "operator": "greater_than", "value": 74}
        ],
    }


def test_what_is_printed_after_an_apply_equals_what_was_applied(acme, monkeypatch):
    document = printed(acme.workspace)
    document.update(
        name="Growth",
        lookback_days=7,
        daily_event_cap=50,
        account_filter={"plan": "enterprise"},
        weights={"Login": 3, "Export": 10, "Heartbeat": 0},
        features={"Exports": ["Export", "Export PDF"], "Sign-in": ["Login"]},
        activation={"users": ["event:Login", "trait:role"], "accounts": ["trait:plan"]},
    )
    document["segments"] = [s for s in document["segments"] if s["name"] != "Mature"]
    document["segments"][0]["conditions"][0]["value"] = 79  # a built-in one, edited
    document["segments"].append(
        {
            "name": "Exporters",
            "target": "users",
            "match": "any",
            "conditions": [
                {
                    "field": "event:Export",
                    "operator": "count_at_least",
                    "value": 3,
                    "within_last_days": 7,
                },
                {"field": "trait:role", "operator": "equals", "value": "admin"},
            ],
        }
    )
    applied = printed(acme.workspace, json.dumps(document), monkeypatch)
    assert applied == document
    assert printed(acme.workspace) == document
    acme.workspace.refresh_from_db()
    assert (acme.workspace.name, acme.workspace.daily_event_cap) == ("Growth", 50)
    assert not Segment.objects.filter(workspace=acme.workspace, name="Mature").exists()
    assert Segment.objects.get(workspace=acme.workspace, name="Score 75 and over").builtin
    assert not Segment.objects.get(workspace=acme.workspace, name="Exporters").builtin
    # Applied again: nothing moves; a weight left out weighs 1 again.
    document["weights"] = {"Login": 3}
    assert printed(acme.workspace, json.dumps(document), monkeypatch) == document
    weights = EventWeight.objects.filter(workspace=acme.workspace)
    assert list(weights.values_list("event_name", "weight")) == [("Login", 3)]


def test_an_invalid_document_lists_every_fault_and_changes_nothing(acme, monkeypatch):
    before = workspace_config_get(workspace=acme.workspace)
    document = json.loads(json.dumps(before))
    document["weights"] = {"Login": 11}
    document["features"] = {"Reports": ["Report Created"], "Sharing": ["Report Created"]}
    document["activation"]["users"] = ["Signed Up"]
    document["segments"].append(
        {
            "name": "Odd",
            "target": "accounts",
            "conditions": [{"field": "event:Login", "operator": "equals", "value": 1}],
        }
    )
    document["segments"].append(dict(document["segments"][0]))  # a second "Score 75 and over"
    document["name"] = "Renamed"
    with pytest.raises(CommandError) as refused:
        printed(acme.workspace, json.dumps(document), monkeypatch)
    message = str(refused.value)
    assert message.startswith("Nothing was changed:")
    assert (
        "features: event 'Report Created' is listed in 'Reports' too; an event belongs to one "
        "feature." in message
    )
    assert "activation.users: 'Signed Up' is not 'event:<name>' or 'trait:<name>'" in message
    assert "weights: 'Login' must weigh a whole number from 0 to 10." in message
    assert "segments[11]: Condition 1: an event condition's operator is count_at_least." in message
    assert "segments[12]: a second segment named 'Score 75 and over'." in message
    assert workspace_config_get(workspace=acme.workspace) == before


def test_input_that_is_not_json_or_a_missing_workspace_is_refused(acme, monkeypatch):
    with pytest.raises(CommandError, match="Standard input is not JSON"):
        printed(acme.workspace, "{nope", monkeypatch)
    with pytest.raises(CommandError, match="No workspace with id 999999"):
        call_command("workspace_config", "--workspace", "999999", stdout=io.StringIO())
