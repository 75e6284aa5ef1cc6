"""Admin: workspace settings with weights inline (saving rescores), segments with validation."""

import html

import pytest
from django.urls import reverse

from engagement.models import Segment, SegmentMember, UserScore
from engagement.scoring import workspace_rescore
from tests.engagement.config_probes import stored_config
from tests.engagement.helpers import apply, group, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def workspace_form(tenant, *, weights=(), **overrides) -> dict:
    data = {
        "name": tenant.workspace.name,
        "lookback_days": "7",
        "daily_event_cap": "",
        "account_filter": "{}",
        "weights-TOTAL_FORMS": str(len(weights)),
        "weights-INITIAL_FORMS": "0",
        "weights-MIN_NUM_FORMS": "0",
        "weights-MAX_NUM_FORMS": "1000",
    }
    for index, (name, weight) in enumerate(weights):
        data[f"weights-{index}-event_name"] = name
        data[f"weights-{index}-weight"] = str(weight)
    data.update(overrides)
    return data


def test_event_names_the_product_sent_are_offered(acme, admin_client):
    apply(acme, track("u1", "Report_Created"), track("u1", "Dashboard_Viewed"))
    page = admin_client.get(reverse("admin:engagement_workspace_change", args=[acme.workspace.id]))
    assert page.status_code == 200
    assert b'<option value="Report_Created">' in page.content
    assert b'<option value="Dashboard_Viewed">' in page.content


def test_saving_weights_rescores_the_workspace(
    acme, admin_client, eager_tasks, django_capture_on_commit_callbacks
):
    apply(acme, track("u1", "Report_Created"), track("u2", "Login", times=2))
    url = reverse("admin:engagement_workspace_change", args=[acme.workspace.id])
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = admin_client.post(
            url, workspace_form(acme, weights=[("Report_Created", 10), ("Login", 0)])
        )
    assert response.status_code == 302
    assert len(callbacks) == 1
    assert dict(acme.workspace.weights.values_list("event_name", "weight")) == {
        "Report_Created": 10,
        "Login": 0,
    }
    scores = {
        s.user.tracking_id: s.raw_score
        for s in UserScore.objects.filter(workspace=acme.workspace).select_related("user")
    }
    assert scores == {"u1": 10, "u2": 0}


def errors_shown(response) -> str:
    """The page's text as a person reads it (form errors included)."""
    return html.unescape(response.content.decode())


DEEP = "[" * 3000 + "]" * 3000


@pytest.mark.parametrize(
    ("overrides", "weights", "error"),
    [
        ({}, [("Login", 11)], "A whole number from 0 to 10."),
        ({}, [("Log\x00in", 1)], "Null characters are not allowed."),
        ({"name": ""}, [], "This field is required."),
        ({"name": "Growth\x00"}, [], "Null characters are not allowed."),
        ({"account_filter": "[1, 2]"}, [], 'an object {"trait": value, ...}'),
        ({"account_filter": '{"plan": {"in": ["a"]}}'}, [], "plan: a text, a number or true/false"),
        ({"account_filter": '{"k\\u0000": "x"}'}, [], '"k\\u0000": must not contain NUL (\\u0000)'),
        ({"account_filter": '{"plan": "pro\\u0000"}'}, [], "plan: must not contain NUL"),
        (
            {"account_filter": '{"seats": NaN}'},
            [],
            "NaN is not a JSON value; write a finite number",
        ),
        ({"account_filter": '{"seats": 1e400}'}, [], "the number 1e400 is too large"),
        ({"account_filter": DEEP}, [], "the document nests deeper than 16 levels"),
        (
            {"daily_event_cap": "0"},
            [],
            "A whole number from 1 to 2,147,483,647, or null for no cap.",
        ),
        ({"daily_event_cap": str(2**31)}, [], "from 1 to 2,147,483,647"),
        ({"daily_event_cap": str(10**30)}, [], "from 1 to 2,147,483,647"),
        ({"lookback_days": "14"}, [], "Select a valid choice"),
    ],
)
def test_bad_workspace_settings_are_refused(acme, admin_client, overrides, weights, error):
    before = stored_config(acme.workspace)
    url = reverse("admin:engagement_workspace_change", args=[acme.workspace.id])
    response = admin_client.post(url, workspace_form(acme, weights=weights, **overrides))
    assert response.status_code == 200
    assert error in errors_shown(response)
    assert stored_config(acme.workspace) == before


def segment_form(acme, conditions: str, **overrides) -> dict:
    return {
        "workspace": acme.workspace.id,
        "name": "Hot",
        "target": "accounts",
        "match": "all",
        "conditions": conditions,
        **overrides,
    }


def condition(operator: str, value: str, field: str = "metric:engagement_score") -> str:
    return f'[{{"field": "{field}", "operator": "{operator}", "value": {value}}}]'


@pytest.mark.parametrize(
    ("form", "error"),
    [
        (
            {"conditions": condition("contains", '"9"')},
            "conditions[0].operator: contains applies to traits, not metrics",
        ),
        (
            {"conditions": condition("greater_than", str(10**30))},
            "conditions[0].value: engagement_score compares with a number from 0 to 32,767",
        ),
        (
            {"conditions": condition("within_last_days", str(10**12), "metric:last_seen")},
            "conditions[0].value: within_last_days counts days: a whole number from 0 to 3,650",
        ),
        (
            {"conditions": condition("count_at_least", str(10**30), "event:E")},
            "count_at_least counts times: a whole number from 1 to 2,147,483,647",
        ),
        (
            {"conditions": condition("equals", '[["a"]]', "trait:plan")},
            "conditions[0].value: a text, a number or true/false (not a list or an object)",
        ),
        ({"conditions": condition("equals", "NaN", "trait:plan")}, "NaN is not a JSON value"),
        ({"conditions": condition("less_than", "1e400", "trait:n")}, "1e400 is too large"),
        ({"conditions": DEEP}, "the document nests deeper than 16 levels"),
        (
            {"conditions": "[" + ", ".join([condition("is_set", "null")[1:-1]] * 51) + "]"},
            "conditions: at most 50 conditions (this list has 51)",
        ),
        ({"conditions": "[]", "name": "Hot\x00"}, "Null characters are not allowed."),
    ],
)
def test_segment_with_invalid_conditions_is_refused(acme, admin_client, form, error):
    before = stored_config(acme.workspace)
    response = admin_client.post(
        reverse("admin:engagement_segment_add"), segment_form(acme, **form)
    )
    assert response.status_code == 200
    assert error in errors_shown(response)
    assert stored_config(acme.workspace) == before


def test_an_existing_segment_with_a_bad_change_keeps_its_conditions(acme, admin_client):
    segment = Segment.objects.get(workspace=acme.workspace, name="Score 75 and over")
    url = reverse("admin:engagement_segment_change", args=[segment.id])
    changed = segment_form(acme, condition("less_than", "-5.5"), name=segment.name)
    response = admin_client.post(url, changed)
    assert response.status_code == 200
    assert "engagement_score compares with a number from 0 to 32,767" in errors_shown(response)
    segment.refresh_from_db()
    assert segment.conditions == [
        {"field": "metric:engagement_score", "operator": "greater_than", "value": 74}
    ]


def test_saving_a_segment_computes_its_members(
    acme, admin_client, eager_tasks, django_capture_on_commit_callbacks
):
    apply(acme, group("u1", "A", {"am.status": "active"}), group("u2", "B"))
    workspace_rescore(workspace_id=acme.workspace.id)
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            reverse("admin:engagement_segment_add"),
            {
                "workspace": acme.workspace.id,
                "name": "Active licenses",
                "target": "accounts",
                "match": "all",
                "conditions": '[{"field": "trait:am.status", "operator": "equals", '
                '"value": "active"}]',
            },
        )
    assert response.status_code == 302
    segment = Segment.objects.get(builtin=False)
    assert [m.account.tracking_id for m in SegmentMember.objects.filter(segment=segment)] == ["A"]
