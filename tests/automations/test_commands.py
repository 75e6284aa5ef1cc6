"""Operators make automations and read their record from the command line."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from automations.delivery import delivery_attempt
from automations.models import Automation
from automations.services import automation_test_send

pytestmark = pytest.mark.both_databases


def _run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_automation_create_prints_the_id_and_the_secret_once(acme, receiver):
    shown = json.loads(
        _run(
            "automation_create",
            "--workspace",
            str(acme.workspace.id),
            "--trigger",
            "score_changed",
            "--threshold",
            "10",
            "--url",
            receiver.url,
            "--condition",
            "trait:mrr greater_than 100000",
            "--json",
        )
    )
    automation = Automation.objects.get(id=shown["id"])
    assert shown["secret"] == automation.secret and shown["secret"].startswith("whsec_")
    assert automation.conditions == [
        {"field": "trait:mrr", "operator": "greater_than", "value": 100000}
    ]


def test_automation_create_refuses_bad_input_clearly(acme, receiver):
    with pytest.raises(CommandError, match="threshold"):
        _run(
            "automation_create",
            "--workspace",
            str(acme.workspace.id),
            "--trigger",
            "score_changed",
            "--url",
            receiver.url,
        )
    with pytest.raises(CommandError, match="No workspace 999"):
        _run("automation_create", "--workspace", "999", "--trigger", "new_account", "--url", "x")
    assert Automation.objects.count() == 0


def test_automation_deliveries_lists_each_with_its_status_and_attempts(acme, receiver):
    receiver.statuses = [500]
    shown = json.loads(
        _run(
            "automation_create",
            "--workspace",
            str(acme.workspace.id),
            "--trigger",
            "new_account",
            "--url",
            receiver.url,
            "--json",
        )
    )
    automation = Automation.objects.get(id=shown["id"])
    delivery = automation_test_send(automation=automation)
    delivery_attempt(delivery_id=delivery.id)
    (row,) = json.loads(_run("automation_deliveries", "--automation", str(automation.id), "--json"))
    assert row["id"] == delivery.id and row["id"].startswith("msg_")
    assert row["event_type"] == "automation.test"
    assert row["status"] == "retrying" and row["attempts"] == 1
    assert row["last_status_code"] == 500
