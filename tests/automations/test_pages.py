"""The dashboard's automation pages: managers create and act; viewers read; others get 404."""

import json
import re

import pytest
from django.test import Client

from automations.delivery import deliveries_due, delivery_attempt
from automations.models import Automation, Delivery, TraitSync
from automations.services import automation_create, automation_test_send
from engagement.models import ProductMembership

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


@pytest.fixture
def viewer(acme, django_user_model):
    user = django_user_model.objects.create_user("vic", password="pw-vic-12345")
    ProductMembership.objects.create(
        user=user, product=acme.product, role=ProductMembership.Role.VIEWER
    )
    client = Client()
    client.force_login(user)
    return client


def _list_url(acme) -> str:
    return f"/w/{acme.workspace.id}/automations/"


def test_a_manager_creates_an_automation_and_sees_its_secret_once(acme, manager, receiver):
    response = manager.post(
        _list_url(acme),
        {
            "name": "Red hot",
            "trigger": "score_changed",
            "target": "accounts",
            "threshold": "10",
            "match": "all",
            "destination": "webhook",
            "url": receiver.url,
            "cooldown_hours": "24",
        },
    )
    automation = Automation.objects.get(name="Red hot")
    assert response.status_code == 302
    page = manager.get(response["Location"]).content.decode()
    assert automation.secret in page
    assert automation.secret not in manager.get(response["Location"]).content.decode()
    assert receiver.url not in page


def test_a_bad_automation_shows_why_and_stores_nothing(acme, manager, receiver):
    response = manager.post(
        _list_url(acme),
        {
            "trigger": "score_changed",
            "target": "accounts",
            "match": "all",
            "destination": "webhook",
            "url": "ftp://nowhere",
            "cooldown_hours": "24",
        },
    )
    assert response.status_code == 400
    text = response.content.decode()
    assert "needs a threshold" in text and "http://" in text
    assert Automation.objects.count() == 0


def test_the_record_shows_deliveries_and_a_manager_replays_one(acme, manager, receiver):
    receiver.statuses = [500, 200]
    automation = automation_create(
        workspace=acme.workspace, trigger="new_account", url=receiver.url
    )
    delivery = automation_test_send(automation=automation)
    delivery_attempt(delivery_id=delivery.id)
    detail = f"/w/{acme.workspace.id}/automations/{automation.id}/"
    page = manager.get(detail).content.decode()
    assert delivery.id in page and "retrying" in page and "answered 500" in page
    attempts = manager.get(f"{detail}deliveries/{delivery.id}/").content.decode()
    assert re.search(r"<td>500</td>", attempts)
    Delivery.objects.filter(id=delivery.id).update(status="failed")
    assert manager.post(detail, {"action": "replay", "delivery": delivery.id}).status_code == 302
    assert Delivery.objects.get(id=delivery.id).status == "pending"


def test_a_viewer_reads_but_cannot_act_and_another_product_gets_404(acme, globex, viewer, receiver):
    automation = automation_create(
        workspace=acme.workspace, trigger="new_account", url=receiver.url
    )
    detail = f"/w/{acme.workspace.id}/automations/{automation.id}/"
    page = viewer.get(detail)
    assert page.status_code == 200 and "Send a test event" not in page.content.decode()
    assert viewer.post(detail, {"action": "test"}).status_code == 403
    assert Delivery.objects.count() == 0
    assert viewer.get(f"/w/{globex.workspace.id}/automations/").status_code == 404


def test_a_manager_adds_a_score_sync_and_a_private_host_is_refused(acme, manager, settings):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = False
    refused = manager.post(
        _list_url(acme),
        {
            "action": "sync_create",
            "host": "http://localhost:8000",
            "write_key": "wk",
            "interval_minutes": "60",
            "prefix": "eds_",
        },
    )
    assert (
        refused.status_code == 200 and "AUTOMATION_ALLOW_PRIVATE_URLS" in refused.content.decode()
    )
    assert not TraitSync.objects.exists()
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = True
    added = manager.post(
        _list_url(acme),
        {
            "action": "sync_create",
            "host": "http://127.0.0.1:9",
            "write_key": "wk-secret-123",
            "interval_minutes": "15",
            "prefix": "eds_",
        },
    )
    assert added.status_code == 302
    page = manager.get(_list_url(acme)).content.decode()
    assert "http://127.0.0.1:9" in page and "15 min" in page and "wk-secret-123" not in page


def test_a_manager_edits_an_automation_and_the_url_is_kept_when_left_empty(acme, manager, receiver):
    automation = automation_create(
        workspace=acme.workspace, trigger="score_changed", threshold=10, url=receiver.url
    )
    detail = f"/w/{acme.workspace.id}/automations/{automation.id}/"
    form = {
        "action": "edit",
        "name": "Ice cold",
        "trigger": "score_changed",
        "target": "accounts",
        "threshold": "15",
        "match": "all",
        "destination": "webhook",
        "url": "",
        "cooldown_hours": "12",
    }
    assert manager.post(detail, form).status_code == 302
    automation.refresh_from_db()
    assert (automation.name, automation.threshold, automation.cooldown_seconds) == (
        "Ice cold",
        15,
        12 * 3600,
    )
    assert automation.url == receiver.url
    refused = manager.post(detail, {**form, "threshold": ""})
    assert refused.status_code == 400 and "needs a threshold" in refused.content.decode()
    automation.refresh_from_db()
    assert automation.threshold == 15


def _form(receiver, **changes: str) -> dict:
    """A new automation's form as a manager posts it, with `changes`."""
    return {
        "name": "Red hot",
        "trigger": "score_changed",
        "target": "accounts",
        "threshold": "10",
        "match": "all",
        "destination": "webhook",
        "url": receiver.url,
        "cooldown_hours": "24",
        **changes,
    }


def _conditions(count: int) -> str:
    condition = {"field": "metric:engagement_score", "operator": "greater_than", "value": 50}
    return json.dumps([condition] * count)


# The outside probe's hostile inputs (issue 70): each answers 400 with the form and its fault.
HOSTILE = {
    "NUL in the name": ({"name": "Red\x00hot"}, "name", "Null characters are not allowed"),
    "conditions nested 3,000 deep": (
        {"conditions": "[" * 3000 + "]" * 3000},
        "conditions",
        "nests deeper than",
    ),
    "a threshold of 10**30": ({"threshold": str(10**30)}, "threshold", "from 1 to 100"),
    "51 conditions": ({"conditions": _conditions(51)}, "conditions", "at most 50 conditions"),
    "NaN in the conditions": (
        {"conditions": '[{"field": "trait:mrr", "operator": "greater_than", "value": NaN}]'},
        "conditions",
        "NaN is not a JSON value",
    ),
    "a nested list as a condition value": (
        {"conditions": '[{"field": "trait:plan", "operator": "equals", "value": [[1]]}]'},
        "conditions",
        "conditions[0].value: a text, a number or true/false",
    ),
    "NUL in a condition's field": (
        {"conditions": '[{"field": "trait:\\u0000", "operator": "is_set"}]'},
        "conditions",
        "conditions[0].field: must not contain NUL",
    ),
    "NaN hours of cool-down": ({"cooldown_hours": "NaN"}, "cooldown_hours", "Enter a number"),
    "a cool-down of 10**30 hours": (
        {"cooldown_hours": str(10**30)},
        "cooldown_hours",
        "a cool-down from 0 to 365 days",
    ),
    "inactive for 10**12 days": (
        {"trigger": "inactive", "threshold": "", "days": str(10**12)},
        "days",
        "from 1 to 3,650",
    ),
}


@pytest.mark.parametrize(("changes", "field", "fault"), HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_input_answers_400_with_the_form_and_its_fault_and_stores_nothing(
    acme, manager, receiver, changes, field, fault
):
    response = manager.post(_list_url(acme), _form(receiver, **changes))

    assert response.status_code == 400
    form = response.context["form"]
    assert any(fault in error for error in form.errors[field]), form.errors
    assert 'id="new-automation"' in response.content.decode()
    assert Automation.objects.count() == 0


@pytest.mark.parametrize(("changes", "field", "fault"), HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_input_to_an_edit_answers_400_and_changes_nothing(
    acme, manager, receiver, changes, field, fault
):
    automation = automation_create(
        workspace=acme.workspace, trigger="score_changed", threshold=10, url=receiver.url
    )
    stored = Automation.objects.filter(id=automation.id).values().get()
    detail = f"/w/{acme.workspace.id}/automations/{automation.id}/"

    response = manager.post(detail, {"action": "edit", **_form(receiver, **changes)})

    assert response.status_code == 400
    form = response.context["edit_form"]
    assert any(fault in error for error in form.errors[field]), form.errors
    assert Automation.objects.filter(id=automation.id).values().get() == stored


def test_every_fault_of_a_form_is_listed_at_once(acme, manager, receiver):
    response = manager.post(
        _list_url(acme),
        _form(
            receiver,
            threshold=str(10**30),
            conditions=_conditions(51),
            url="ftp://nowhere",
            cooldown_hours="-1",
        ),
    )

    assert response.status_code == 400
    errors = response.context["form"].errors
    assert set(errors) == {"threshold", "conditions", "url", "cooldown_hours"}
    assert Automation.objects.count() == 0


def test_switching_off_cancels_pending_deliveries_and_switching_on_sends_none(
    acme, manager, receiver
):
    receiver.statuses = [500]
    automation = automation_create(
        workspace=acme.workspace, trigger="new_account", url=receiver.url
    )
    retrying = automation_test_send(automation=automation)
    delivery_attempt(delivery_id=retrying.id)
    detail = f"/w/{acme.workspace.id}/automations/{automation.id}/"

    assert manager.post(detail, {"action": "disable"}).status_code == 302

    automation.refresh_from_db()
    assert not automation.enabled and "on the dashboard by mia" in automation.disabled_reason
    assert Delivery.objects.get(id=retrying.id).status == "cancelled"
    page = manager.get(detail).content.decode()
    assert "cancelled" in page and "Switched off" in page and "Send a test event" not in page
    one = manager.get(f"{detail}deliveries/{retrying.id}/").content.decode()
    assert "<strong>cancelled</strong>" in one
    assert manager.post(detail, {"action": "enable"}).status_code == 302
    automation.refresh_from_db()
    assert automation.enabled and automation.disabled_reason == ""
    assert Delivery.objects.get(id=retrying.id).status == "cancelled"
    assert deliveries_due() == []
    assert len(receiver.requests) == 1


def test_switching_on_an_automation_whose_stored_settings_are_at_fault_shows_why(
    acme, manager, receiver
):
    automation = automation_create(
        workspace=acme.workspace, trigger="new_account", url=receiver.url
    )
    # Stored by an older release, past today's rules.
    Automation.objects.filter(id=automation.id).update(
        enabled=False, conditions=json.loads(_conditions(51))
    )
    detail = f"/w/{acme.workspace.id}/automations/{automation.id}/"

    response = manager.post(detail, {"action": "enable"})

    assert response.status_code == 400
    assert "at most 50 conditions" in response.content.decode()
    assert not Automation.objects.get(id=automation.id).enabled


def test_the_detail_page_shows_conditions_in_words(acme, manager, receiver):
    automation = Automation.objects.create(
        workspace=acme.workspace,
        name="Pro accounts up",
        trigger="score_changed",
        threshold=10,
        url=receiver.url,
        conditions=[
            {"field": "trait:plan", "operator": "equals", "value": "pro"},
            {"field": "event:Report_Created", "operator": "count_at_least", "value": 3},
        ],
    )

    page = manager.get(f"/w/{acme.workspace.id}/automations/{automation.id}/").content.decode()

    # The edit form keeps the JSON to edit; the settings read as sentences.
    assert "All conditions: plan equals pro; Report_Created at least 3 times" in page
    assert "<code>trait:plan" not in page
