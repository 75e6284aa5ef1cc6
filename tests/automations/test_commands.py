"""Operators make automations and read their record from the command line."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from automations.delivery import deliveries_due, delivery_attempt
from automations.models import Automation, Delivery
from automations.services import automation_create, automation_test_send

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


def _create(acme, receiver, *args: str) -> str:
    base = ["--workspace", str(acme.workspace.id), "--trigger", "score_changed"]
    return _run("automation_create", *base, "--url", receiver.url, *args)


_CONDITION = "metric:engagement_score greater_than 50"
# The outside probe's hostile inputs (issue 70), from the command line.
HOSTILE = {
    "a lone surrogate in the name": (["--threshold", "10", "--name", "Red\udcffhot"], "name"),
    "NUL in the name": (["--threshold", "10", "--name", "Red\x00hot"], "name"),
    "a threshold of 10**30": (["--threshold", str(10**30)], "threshold"),
    "a condition nested 3,000 deep": (
        ["--threshold", "10", "--condition", "trait:x equals " + "[" * 3000 + "]" * 3000],
        "nests deeper than",
    ),
    "51 conditions": (["--threshold", "10", *["--condition", _CONDITION] * 51], "at most 50"),
    "NaN hours of cool-down": (["--threshold", "10", "--cooldown-hours", "nan"], "cooldown"),
    "infinite hours of cool-down": (["--threshold", "10", "--cooldown-hours", "inf"], "cooldown"),
    "a condition compared with 1e400": (
        ["--threshold", "10", "--condition", "metric:engagement_score greater_than 1e400"],
        "conditions",
    ),
}


@pytest.mark.parametrize(("args", "fault"), HOSTILE.values(), ids=HOSTILE.keys())
def test_automation_create_refuses_hostile_input_with_the_fault_and_stores_nothing(
    acme, receiver, args, fault
):
    with pytest.raises(CommandError, match=fault):
        _create(acme, receiver, *args)
    assert Automation.objects.count() == 0


def test_automation_create_lists_every_fault_at_once(acme, receiver):
    with pytest.raises(CommandError) as refused:
        _run(
            "automation_create",
            "--workspace",
            str(acme.workspace.id),
            "--trigger",
            "inactive",
            "--days",
            "1000000",
            "--url",
            "ftp://nowhere",
            "--condition",
            "trait:x equals {",
            "--cooldown-hours",
            "-1",
        )
    message = str(refused.value)
    for field in ("days:", "url:", "conditions:", "cooldown_seconds:"):
        assert field in message
    assert Automation.objects.count() == 0


def test_automation_switch_off_cancels_pending_deliveries_and_the_record_shows_it(acme, receiver):
    receiver.statuses = [500]
    automation = automation_create(
        workspace=acme.workspace, trigger="new_account", url=receiver.url
    )
    delivery = automation_test_send(automation=automation)
    delivery_attempt(delivery_id=delivery.id)

    shown = _run(
        "automation_switch_off", "--automation", str(automation.id), "--reason", "Moving", "--json"
    )

    assert json.loads(shown) == {
        "id": automation.id,
        "enabled": False,
        "was_enabled": True,
        "cancelled": 1,
    }
    automation.refresh_from_db()
    assert not automation.enabled and automation.disabled_reason == "Moving"
    assert Delivery.objects.get(id=delivery.id).status == "cancelled"
    assert deliveries_due() == []
    (row,) = json.loads(_run("automation_deliveries", "--automation", str(automation.id), "--json"))
    assert row["status"] == "cancelled"
    text = _run("automation_deliveries", "--automation", str(automation.id))
    assert "Moving" in text and "cancelled" in text


def test_the_commands_refuse_what_is_not_an_automation_or_a_limit(acme, receiver):
    with pytest.raises(CommandError, match="No automation"):
        _run("automation_switch_off", "--automation", str(10**30))
    automation = automation_create(
        workspace=acme.workspace, trigger="new_account", url=receiver.url
    )
    with pytest.raises(CommandError, match="--reason"):
        _run("automation_switch_off", "--automation", str(automation.id), "--reason", "a\x00b")
    assert Automation.objects.get(id=automation.id).enabled
    with pytest.raises(CommandError, match="--limit"):
        _run("automation_deliveries", "--automation", str(automation.id), "--limit", "-1")
