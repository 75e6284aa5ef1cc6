"""Admin: workspace settings with weights inline (saving rescores), segments with validation."""

import pytest
from django.urls import reverse

from config.celery import app
from engagement.models import EventWeight, Segment, SegmentMember, UserScore
from engagement.scoring import workspace_rescore
from tests.engagement.helpers import apply, group, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


@pytest.fixture
def eager_tasks():
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


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


@pytest.mark.parametrize(
    ("overrides", "weights", "message"),
    [
        ({}, [("Login", 11)], b"less than or equal to 10"),
        ({"account_filter": "[1, 2]"}, [], b"The account filter must be an object"),
        ({"account_filter": '{"plan": {"in": ["a"]}}'}, [], b"compare with a text, number"),
        ({"daily_event_cap": "0"}, [], b"greater than or equal to 1"),
        ({"lookback_days": "14"}, [], b"Select a valid choice"),
    ],
)
def test_bad_workspace_settings_are_refused(acme, admin_client, overrides, weights, message):
    url = reverse("admin:engagement_workspace_change", args=[acme.workspace.id])
    response = admin_client.post(url, workspace_form(acme, weights=weights, **overrides))
    assert response.status_code == 200
    assert message in response.content
    assert not EventWeight.objects.filter(workspace=acme.workspace).exists()


def test_segment_with_invalid_conditions_is_refused(acme, admin_client):
    response = admin_client.post(
        reverse("admin:engagement_segment_add"),
        {
            "workspace": acme.workspace.id,
            "name": "Hot",
            "target": "accounts",
            "match": "all",
            "conditions": '[{"field": "metric:engagement_score", "operator": "contains", '
            '"value": "9"}]',
        },
    )
    assert response.status_code == 200
    assert b"contains applies to traits, not metrics" in response.content
    assert not Segment.objects.filter(builtin=False).exists()


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
