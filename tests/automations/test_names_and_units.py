"""One unit for the cool-down everywhere (hours), the delivery's body as the JSON that was sent,
admin names in English, and default names that tell two automations apart."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from automations.delivery import delivery_attempt
from automations.models import Automation
from automations.services import automation_create, automation_new, automation_test_send
from engagement.models import ProductMembership, Segment

pytestmark = pytest.mark.both_databases


@pytest.fixture
def manager(acme, django_user_model):
    user = django_user_model.objects.create_user("mia", password="pw-mia-12345")
    ProductMembership.objects.create(
        user=user, product=acme.product, role=ProductMembership.Role.MANAGER
    )
    client = Client()
    client.force_login(user)
    return client


def _made(acme, receiver, **settings) -> Automation:
    return automation_create(
        workspace=acme.workspace,
        url=receiver.url,
        **{"trigger": "score_changed", "threshold": 10, **settings},
    )


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(86400, "24 hours"), (3600, "1 hour"), (1800, "30 minutes"), (5400, "90 minutes")],
)
def test_the_cooldown_reads_in_hours_on_the_list_the_detail_page_and_the_admin(
    acme, receiver, manager, admin_client, seconds, shown
):
    automation = _made(acme, receiver, cooldown_seconds=seconds)

    listing = manager.get(f"/w/{acme.workspace.id}/automations/").content.decode()
    detail = manager.get(f"/w/{acme.workspace.id}/automations/{automation.id}/").content.decode()
    admin_list = admin_client.get("/admin/automations/automation/").content.decode()

    assert f"<td>{shown}</td>" in listing
    assert f'<dd id="cooldown">{shown} per subject</dd>' in detail
    assert f'<td class="field-cooldown">{shown}</td>' in admin_list
    assert " s per subject" not in detail


def test_the_forms_ask_hours_and_show_a_whole_number_back(acme, receiver, manager, admin_client):
    automation = _made(acme, receiver, cooldown_seconds=24 * 3600)

    detail = manager.get(f"/w/{acme.workspace.id}/automations/{automation.id}/").content.decode()
    change = admin_client.get(f"/admin/automations/automation/{automation.id}/change/")

    assert 'name="cooldown_hours" value="24"' in detail
    assert "Cool-down (hours)" in detail
    html = change.content.decode()
    assert 'name="cooldown_hours" value="24"' in html and "Cool-down (hours)" in html
    assert 'name="cooldown_seconds"' not in html


def test_half_an_hour_typed_in_the_admin_is_stored_as_1800_seconds(acme, receiver, admin_client):
    automation = _made(acme, receiver)
    form = {
        "workspace": str(acme.workspace.id),
        "name": automation.name,
        "trigger": "score_changed",
        "target": "accounts",
        "threshold": "10",
        "conditions": "",
        "match": "all",
        "destination": "webhook",
        "cooldown_hours": "0.5",
        "enabled": "on",
        "receiver_url": "",
    }

    response = admin_client.post(f"/admin/automations/automation/{automation.id}/change/", form)

    assert response.status_code == 302
    automation.refresh_from_db()
    assert automation.cooldown_seconds == 1800


def test_automation_create_prints_the_cooldown_in_hours(acme, receiver):
    out = StringIO()
    call_command(
        "automation_create",
        "--workspace",
        str(acme.workspace.id),
        "--trigger",
        "new_account",
        "--url",
        receiver.url,
        "--cooldown-hours",
        "12",
        stdout=out,
    )
    assert "cool-down 12 hours per subject" in out.getvalue()

    out = StringIO()
    call_command(
        "automation_create",
        "--workspace",
        str(acme.workspace.id),
        "--trigger",
        "new_account",
        "--url",
        receiver.url,
        "--cooldown-hours",
        "0.5",
        "--json",
        stdout=out,
    )
    assert json.loads(out.getvalue())["cooldown_hours"] == 0.5


def test_the_delivery_page_shows_the_json_that_was_sent(acme, receiver, manager, admin_client):
    automation = _made(acme, receiver)
    delivery = automation_test_send(automation=automation)
    delivery_attempt(delivery_id=delivery.id)
    (sent,) = receiver.requests

    page = manager.get(
        f"/w/{acme.workspace.id}/automations/{automation.id}/deliveries/{delivery.id}/"
    )
    admin_page = admin_client.get(f"/admin/automations/delivery/{delivery.id}/change/")

    shown = page.context["body"]
    assert json.loads(shown) == sent.json()
    assert shown == json.dumps(sent.json(), indent=2, ensure_ascii=False)
    html = page.content.decode()
    assert '"type": "automation.test"' in html.replace("&quot;", '"')
    assert "{'" not in html  # never a Python dict
    assert admin_page.status_code == 200
    admin_html = admin_page.content.decode().replace("&quot;", '"')
    assert '<pre>{\n  "' in admin_html and '"type": "automation.test"' in admin_html


def test_the_admin_names_its_pages_in_english(acme, admin_client):
    index = admin_client.get("/admin/").content.decode()

    assert ">Deliveries<" in index and ">Score syncs<" in index
    assert "Deliverys" not in index and "Trait syncs" not in index


def test_a_default_name_says_what_fires_and_where(acme, receiver):
    new_account = automation_new(
        workspace=acme.workspace, trigger="new_account", url="https://hooks.example.com/eds"
    )
    segment = Segment.objects.filter(workspace=acme.workspace, target="accounts").first()
    names = {
        "new_account": new_account.name,
        "score_changed": automation_new(
            workspace=acme.workspace,
            trigger="score_changed",
            threshold=20,
            url="https://a.example.com/",
        ).name,
        "band_entered": automation_new(
            workspace=acme.workspace,
            trigger="band_entered",
            threshold=75,
            destination="slack",
            url="https://hooks.slack.com/services/T/B/X",
        ).name,
        "segment_entered": automation_new(
            workspace=acme.workspace,
            trigger="segment_entered",
            segment=segment,
            url="https://a.example.com/",
        ).name,
        "inactive": automation_new(
            workspace=acme.workspace,
            trigger="inactive",
            target="users",
            days=30,
            url="https://a.example.com/",
        ).name,
    }

    assert names == {
        "new_account": "New account → hooks.example.com",
        "score_changed": "Score of an account changed by 20 or more → a.example.com",
        "band_entered": "An account entered the 75 and over band → Slack",
        "segment_entered": f"An account entered {segment.name} → a.example.com",
        "inactive": "No event from a user for 30 days → a.example.com",
    }


def test_two_automations_with_the_same_default_name_are_told_apart(acme, receiver):
    first = _made(acme, receiver, trigger="new_account", threshold=None)
    second = _made(acme, receiver, trigger="new_account", threshold=None)
    third = _made(acme, receiver, trigger="new_account", threshold=None)
    named = _made(acme, receiver, trigger="new_account", threshold=None, name="Sales alerts")

    assert first.name == "New account → 127.0.0.1"
    assert (second.name, third.name) == (f"{first.name} (2)", f"{first.name} (3)")
    assert named.name == "Sales alerts"
    assert _made(acme, receiver, threshold=10).name != _made(acme, receiver, threshold=20).name
