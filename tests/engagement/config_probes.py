"""The inputs an outside probe of the configuration document found to give a traceback or a 500
(issue 70), and a few of their kind: each a change to a valid document, as the JSON text a person
would send, and the fault the answer must name. Shared by the command's and the page's tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from engagement.models import Workspace
from engagement.workspace_config import workspace_config_get

# Stands for a JSON literal that json.dumps cannot write (1e400, a 3,000-level nesting).
_RAW = "\u2063raw\u2063"
DAYS = "counts days: a whole number from 0 to 3,650"
NUL = "must not contain NUL (\\u0000) characters"
SURROGATE = "must be valid Unicode (no lone surrogates)"
CAP = "daily_event_cap: a whole number from 1 to 2,147,483,647, or null for no cap"


@dataclass(frozen=True)
class Probe:
    change: Callable[[dict], object]
    fault: str  # {new} stands for the path of a segment appended to the document
    raw: str | None = None  # the JSON text _RAW stands for

    def text(self, document: dict) -> str:
        """The JSON text of `document` (copied) with this probe's change."""
        document = json.loads(json.dumps(document))
        self.change(document)
        text = json.dumps(document)
        return text.replace(json.dumps(_RAW), self.raw) if self.raw else text

    def expected(self, document: dict) -> str:
        return self.fault.format(new=f"segments[{len(document['segments'])}]")


def _segment(*conditions: dict, name: str = "Probe") -> Callable[[dict], object]:
    segment = {"name": name, "target": "accounts", "match": "all", "conditions": list(conditions)}
    return lambda document: document["segments"].append(segment)


def _condition(field: str, operator: str, value: object, **more: object) -> dict:
    return {"field": field, "operator": operator, "value": value, **more}


def _set(key: str, value: object) -> Callable[[dict], object]:
    return lambda document: document.__setitem__(key, value)


def _filter(key: str, value: object) -> Callable[[dict], object]:
    return lambda document: document["account_filter"].__setitem__(key, value)


def _weight(event: str, weight: object = 3) -> Callable[[dict], object]:
    return lambda document: document["weights"].__setitem__(event, weight)


PROBES = {
    # Text PostgreSQL cannot store.
    "nul in a weight name": Probe(
        _weight("Report\x00Created"), f'weights."Report\\u0000Created": {NUL}'
    ),
    "surrogate in a weight name": Probe(_weight("\ud800"), f'weights."\\ud800": {SURROGATE}'),
    "nul in the name": Probe(_set("name", "Growth\x00"), f"name: {NUL}"),
    "nul in a segment name": Probe(_segment(name="Hot\x00"), f"{{new}}.name: {NUL}"),
    "surrogate in a segment name": Probe(_segment(name="\udfff"), f"{{new}}.name: {SURROGATE}"),
    "nul in a filter key": Probe(_filter("k\x00", "x"), f'account_filter."k\\u0000": {NUL}'),
    "nul in a filter value": Probe(_filter("plan", "pro\x00"), f"account_filter.plan: {NUL}"),
    "nul in a feature name": Probe(
        _set("features", {"Rep\x00orts": ["Report_Created"]}), f'features."Rep\\u0000orts": {NUL}'
    ),
    "nul in a feature's event": Probe(
        _set("features", {"Reports": ["Report_Created", "Export\x00"]}),
        f"features.Reports[1]: {NUL}",
    ),
    "nul in an activation step": Probe(
        _set("activation", {"users": ["event:Signed\x00Up"], "accounts": []}),
        f"activation.users[0]: {NUL}",
    ),
    "nul in a condition's trait key": Probe(
        _segment(_condition("trait:pl\x00an", "equals", "pro")),
        f"{{new}}.conditions[0].field: {NUL}",
    ),
    # Numbers beyond what is stored or evaluated.
    "cap of 2**31": Probe(_set("daily_event_cap", 2**31), CAP),
    "cap of 10**30": Probe(_set("daily_event_cap", 10**30), CAP),
    "NaN filter value": Probe(_filter("seats", _RAW), "NaN is not a JSON value", raw="NaN"),
    "1e400 filter value": Probe(
        _filter("seats", _RAW), "the number 1e400 is too large", raw="1e400"
    ),
    "NaN condition value": Probe(
        _segment(_condition("trait:seats", "greater_than", _RAW)), "NaN is not a JSON", raw="NaN"
    ),
    "1e400 condition value": Probe(
        _segment(_condition("trait:seats", "less_than", _RAW)), "1e400 is too large", raw="1e400"
    ),
    "-Infinity condition value": Probe(
        _segment(_condition("trait:seats", "less_than", _RAW)),
        "-Infinity is not a JSON value",
        raw="-Infinity",
    ),
    "3,000 levels of nesting": Probe(
        _segment(_condition("trait:plan", "equals", _RAW)),
        "the document nests deeper than 16 levels",
        raw="[" * 3000 + "]" * 3000,
    ),
    # Accepted before, and then every rescore of the workspace raised.
    "score greater than 10**30": Probe(
        _segment(_condition("metric:engagement_score", "greater_than", 10**30)),
        "{new}.conditions[0].value: engagement_score compares with a number from 0 to 32,767",
    ),
    "count_at_least 10**30": Probe(
        _segment(_condition("event:E", "count_at_least", 10**30)),
        "{new}.conditions[0].value: count_at_least counts times: a whole number from 1 to "
        "2,147,483,647",
    ),
    "within_last_days 1,000,000": Probe(
        _segment(_condition("metric:last_seen", "within_last_days", 1_000_000)),
        f"{{new}}.conditions[0].value: within_last_days {DAYS}",
    ),
    "within_last_days 10**12": Probe(
        _segment(_condition("trait:signup", "within_last_days", 10**12)),
        f"{{new}}.conditions[0].value: within_last_days {DAYS}",
    ),
    "more_than_days_ago 10**12": Probe(
        _segment(_condition("metric:last_seen", "more_than_days_ago", 10**12)),
        f"{{new}}.conditions[0].value: more_than_days_ago {DAYS}",
    ),
    "an event's within_last_days 10**12": Probe(
        _segment(_condition("event:E", "count_at_least", 1, within_last_days=10**12)),
        "{new}.conditions[0].within_last_days: a whole number from 0 to 3,650",
    ),
    "last_seen in the year 9999": Probe(
        _segment(_condition("metric:last_seen", "less_than", "9999-12-31T23:59:59-05:00")),
        "{new}.conditions[0].value: an ISO 8601 date-time from 1970 to 2999",
    ),
    # Values that are not plain, and too many conditions.
    "a nested condition value": Probe(
        _segment(_condition("trait:plan", "equals", [["a"], {"b": 1}])),
        "{new}.conditions[0].value: a text, a number or true/false (not a list or an object)",
    ),
    "51 conditions": Probe(
        _segment(*[_condition("trait:plan", "is_set", None)] * 51),
        "{new}.conditions: at most 50 conditions (this list has 51)",
    ),
}


def stored_config(workspace: Workspace) -> dict:
    """The workspace's configuration as stored now (not as an object in memory holds it)."""
    return workspace_config_get(workspace=Workspace.objects.get(id=workspace.id))


def probe_cases() -> list:
    return [pytest.param(probe, id=name) for name, probe in PROBES.items()]
