"""The admin never shows an automation's URL or signing secret back, checks every setting with
the service's rule, and switching off there cancels pending deliveries."""

import json

import pytest

from automations.delivery import delivery_attempt
from automations.models import Automation, Delivery
from automations.services import automation_create, automation_test_send

pytestmark = pytest.mark.both_databases


def test_the_change_page_never_renders_the_url_or_the_secret(acme, receiver, admin_client):
    automation = automation_create(
        workspace=acme.workspace, trigger="new_account", url=receiver.url
    )
    page = admin_client.get(f"/admin/automations/automation/{automation.id}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert automation.secret not in html and receiver.url not in html
    listing = admin_client.get("/admin/automations/automation/").content.decode()
    assert automation.secret not in listing and receiver.url not in listing


def _change_form(automation: Automation, **changes: str) -> dict:
    """The admin's change form as it comes back, with `changes` (an absent `enabled` is off)."""
    form = {
        "workspace": str(automation.workspace_id),
        "name": automation.name,
        "trigger": automation.trigger,
        "target": automation.target,
        "threshold": "" if automation.threshold is None else str(automation.threshold),
        "segment": "",
        "days": "",
        "conditions": json.dumps(automation.conditions),
        "match": automation.match,
        "destination": automation.destination,
        "cooldown_hours": str(automation.cooldown_seconds / 3600),
        "enabled": "on",
        "receiver_url": "",
        **changes,
    }
    return {name: value for name, value in form.items() if value is not None}


HOSTILE = {
    "NUL in the name": ({"name": "Red\x00hot"}, "name"),
    "conditions nested 3,000 deep": ({"conditions": "[" * 3000 + "]" * 3000}, "conditions"),
    "a threshold of 10**30": ({"threshold": str(10**30)}, "threshold"),
    "51 conditions": (
        {
            "conditions": json.dumps(
                [{"field": "metric:engagement_score", "operator": "greater_than", "value": 5}] * 51
            )
        },
        "conditions",
    ),
    "NaN in the conditions": (
        {"conditions": '[{"field": "trait:a", "operator": "equals", "value": NaN}]'},
        "conditions",
    ),
    "a cool-down of 10**30 hours": ({"cooldown_hours": str(10**30)}, "cooldown_hours"),
    "NaN hours of cool-down": ({"cooldown_hours": "NaN"}, "cooldown_hours"),
}


@pytest.mark.parametrize(("changes", "field"), HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_input_in_the_admin_shows_the_fault_and_changes_nothing(
    acme, receiver, admin_client, changes, field
):
    automation = automation_create(
        workspace=acme.workspace, trigger="score_changed", threshold=10, url=receiver.url
    )
    stored = Automation.objects.filter(id=automation.id).values().get()

    response = admin_client.post(
        f"/admin/automations/automation/{automation.id}/change/",
        _change_form(automation, **changes),
    )

    assert response.status_code == 200  # the form again, with its faults
    assert field in response.context["adminform"].form.errors
    assert Automation.objects.filter(id=automation.id).values().get() == stored


def test_saving_it_off_in_the_admin_cancels_its_pending_deliveries(acme, receiver, admin_client):
    receiver.statuses = [500]
    automation = automation_create(
        workspace=acme.workspace, trigger="new_account", url=receiver.url
    )
    delivery = automation_test_send(automation=automation)
    delivery_attempt(delivery_id=delivery.id)

    response = admin_client.post(
        f"/admin/automations/automation/{automation.id}/change/",
        _change_form(automation, enabled=None),
    )

    assert response.status_code == 302
    automation.refresh_from_db()
    assert not automation.enabled and "in the admin" in automation.disabled_reason
    assert Delivery.objects.get(id=delivery.id).status == "cancelled"


def test_the_admin_switch_off_action_cancels_pending_deliveries(acme, receiver, admin_client):
    automation = automation_create(
        workspace=acme.workspace, trigger="new_account", url=receiver.url
    )
    delivery = automation_test_send(automation=automation)

    response = admin_client.post(
        "/admin/automations/automation/",
        {"action": "switch_off", "_selected_action": [str(automation.id)]},
    )

    assert response.status_code == 302
    assert not Automation.objects.get(id=automation.id).enabled
    assert Delivery.objects.get(id=delivery.id).status == "cancelled"
    assert receiver.requests == []
