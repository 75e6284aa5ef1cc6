"""python manage.py workspace_config --workspace ID [--apply]: a workspace as code."""

import functools
import io
import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, ManagementUtility, call_command
from django.db import connections
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engagement.builtin_segments import BUILTIN_SEGMENTS
from engagement.input_rules import DocumentError, document_load
from engagement.models import EventWeight, Segment
from engagement.segment_conditions import OPERATORS
from engagement.workspace_config import workspace_config_apply
from tests.engagement.config_probes import PROBES, probe_cases, stored_config

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
    before = stored_config(acme.workspace)
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
    odd = len(document["segments"]) - 2  # after the built-in segments
    document["name"] = "Renamed"
    with pytest.raises(CommandError) as refused:
        printed(acme.workspace, json.dumps(document), monkeypatch)
    # Every fault after the path of its value, list positions from 0 as in the JSON.
    assert str(refused.value).splitlines() == [
        "Nothing was changed:",
        "- weights.Login: a whole number from 0 to 10",
        "- features.Sharing[0]: 'Report Created' is listed in 'Reports' too; an event belongs "
        "to one feature",
        "- activation.users[0]: a step, 'event:<name>' or 'trait:<name>'",
        f"- segments[{odd}].conditions[0].operator: an event condition's operator is "
        "count_at_least",
        f"- segments[{odd + 1}].name: a second segment named 'Score 75 and over'",
    ]
    assert stored_config(acme.workspace) == before


def test_input_that_is_not_json_or_a_missing_workspace_is_refused(acme, monkeypatch):
    before = stored_config(acme.workspace)
    with pytest.raises(CommandError, match="Nothing was changed:\n- standard input: not JSON"):
        printed(acme.workspace, "{nope", monkeypatch)
    with pytest.raises(CommandError, match="The configuration must be a JSON object"):
        printed(acme.workspace, "[]", monkeypatch)
    with pytest.raises(CommandError, match="No workspace with id 999999"):
        call_command("workspace_config", "--workspace", "999999", stdout=io.StringIO())
    assert stored_config(acme.workspace) == before


@pytest.mark.parametrize("probe", probe_cases())
def test_a_hostile_document_is_refused_with_its_fault_and_changes_nothing(acme, monkeypatch, probe):
    before = stored_config(acme.workspace)
    with pytest.raises(CommandError) as refused:
        printed(acme.workspace, probe.text(before), monkeypatch)
    message = str(refused.value)
    assert message.startswith("Nothing was changed:\n- ")
    assert any(probe.expected(before) in line for line in message.splitlines()[1:])
    assert stored_config(acme.workspace) == before


def test_the_command_exits_non_zero_with_the_faults_and_no_traceback(acme, monkeypatch, capsys):
    """As manage.py runs it: the faults on standard error, exit status 1, no traceback."""
    before = stored_config(acme.workspace)
    monkeypatch.setattr("sys.stdin", io.StringIO(PROBES["cap of 10**30"].text(before)))
    # run_from_argv closes the connections when it is done; here the test's transaction holds it.
    monkeypatch.setattr(connections, "close_all", lambda: None)
    argv = ["manage.py", "workspace_config", "--workspace", str(acme.workspace.id), "--apply"]
    with pytest.raises(SystemExit) as exited:
        ManagementUtility(argv).execute()
    assert exited.value.code == 1
    printed_out = capsys.readouterr()
    assert printed_out.out == ""
    assert printed_out.err.splitlines() == [
        "CommandError: Nothing was changed:",
        "- daily_event_cap: a whole number from 1 to 2,147,483,647, or null for no cap",
    ]
    assert stored_config(acme.workspace) == before


# --- Generated hostile documents -----------------------------------------------------------------

_HOSTILE_TEXTS = st.sampled_from(["", " ", "\x00", "a\x00b", "\ud800", "x\udfff", "k" * 256])
_TEXTS = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=8),  # lone surrogates and NUL too
    st.sampled_from(["Login", "plan", "Reports"]),
    _HOSTILE_TEXTS,
)
_NUMBERS = st.one_of(
    st.integers(-3, 12),
    st.sampled_from([2**31 - 1, 2**31, 10**15, 10**15 + 1, 10**30, -(10**30), 3650, 3651]),
    st.floats(allow_nan=True, allow_infinity=True),
)
_PLAIN = st.one_of(st.none(), st.booleans(), _NUMBERS, _TEXTS)
# Deep enough to be refused by the document reader, shallow enough for json.dumps.
_DEEP = st.integers(17, 40).map(lambda depth: functools.reduce(lambda v, _: [v], range(depth), 1))
_VALUES = st.one_of(
    st.recursive(
        _PLAIN,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXTS, inner, max_size=3),
        max_leaves=6,
    ),
    _DEEP,
)
_FIELDS = st.one_of(
    st.sampled_from(
        ["trait:plan", "metric:engagement_score", "metric:last_seen", "metric:raw_score", "event:E"]
    ),
    _TEXTS.map(lambda text: f"trait:{text}"),
    _TEXTS,
)
_CONDITION = st.fixed_dictionaries(
    {
        "field": _FIELDS,
        "operator": st.sampled_from([*OPERATORS, "count_at_least"]) | _VALUES,
        "value": st.one_of(_VALUES, st.sampled_from(["2025-01-01", "9999-12-31T23:00:00-05:00"])),
    },
    optional={"within_last_days": _VALUES},
)
_SEGMENT = st.fixed_dictionaries(
    {
        "name": _TEXTS,
        "target": st.sampled_from(["accounts", "users"]) | _VALUES,
        "match": st.sampled_from(["all", "any"]) | _VALUES,
        "conditions": st.lists(_CONDITION, max_size=3) | _VALUES,
    }
)
_STEPS = st.lists(st.one_of(st.sampled_from(["event:A", "trait:b"]), _TEXTS), max_size=3)
DOCUMENTS = st.fixed_dictionaries(
    {
        "name": _TEXTS,
        "lookback_days": st.sampled_from([1, 7, 30]) | _VALUES,
        "daily_event_cap": st.one_of(st.none(), st.integers(1, 10), _VALUES),
        "account_filter": st.dictionaries(_TEXTS, _VALUES, max_size=3) | _VALUES,
        "weights": st.dictionaries(_TEXTS, st.integers(0, 10) | _VALUES, max_size=3) | _VALUES,
        "features": st.dictionaries(_TEXTS, st.lists(_TEXTS, max_size=3), max_size=2) | _VALUES,
        "activation": st.fixed_dictionaries({"users": _STEPS, "accounts": _STEPS}) | _VALUES,
        "segments": st.lists(_SEGMENT, max_size=3) | _VALUES,
    }
)


def comparable(config: dict) -> dict:
    """The document as it reads back: segments are listed by creation, not in the order sent."""
    return {**config, "segments": sorted(config["segments"], key=lambda s: s["name"])}


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(document=DOCUMENTS)
def test_a_generated_hostile_document_is_applied_whole_or_refused_whole(acme, document):
    """Applied as given (hostile Python values: NaN, surrogates, NUL) and as its JSON text read
    the way the command and the page read it: a ValidationError or a DocumentError and nothing
    changed, or applied and reading back equal. Nothing else is raised."""
    attempts = [document]
    try:
        attempts.append(document_load(json.dumps(document)))
    except DocumentError:  # NaN, Infinity or too deep: refused before anything is read
        pass
    for attempt in attempts:
        before = stored_config(acme.workspace)
        try:
            applied = workspace_config_apply(workspace_id=acme.workspace.id, document=attempt)
        except ValidationError as refused:
            event("refused")
            assert refused.messages
            assert stored_config(acme.workspace) == before
        else:
            event("applied")
            assert comparable(applied) == comparable(attempt)
            assert comparable(stored_config(acme.workspace)) == comparable(attempt)
