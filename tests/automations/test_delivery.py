"""Deliveries reach a real local receiver, signed, retried on the schedule, and on record."""

from datetime import timedelta

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from automations.delivery import (
    automation_disable_if_failing,
    deliveries_due,
    deliveries_replay_failed_since,
    delivery_attempt,
    delivery_replay,
)
from automations.models import Automation, Delivery, DeliveryAttempt
from automations.services import automation_create, automation_secret_rotate, automation_test_send

pytestmark = pytest.mark.both_databases


@pytest.fixture
def hook(acme, receiver, settings):
    settings.AUTOMATION_RETRY_SCHEDULE = [0, 5, 300]
    return automation_create(workspace=acme.workspace, trigger="new_account", url=receiver.url)


def _attempt_now(delivery: Delivery, now=None) -> float | None:
    return delivery_attempt(delivery_id=delivery.id, now=now)


def test_a_delivery_arrives_signed_and_verifies_with_standardwebhooks(hook, receiver):
    delivery = automation_test_send(automation=hook)
    assert _attempt_now(delivery) is None
    (received,) = receiver.requests
    assert received.headers["webhook-id"] == delivery.id
    payload = Webhook(hook.secret).verify(received.body, received.headers)
    assert payload["type"] == "automation.test"
    assert payload["data"]["automation"]["id"] == hook.id
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts == 1
    attempt = DeliveryAttempt.objects.get(delivery=delivery)
    assert attempt.status_code == 200 and '"received"' in attempt.response_excerpt


def test_a_receiver_failing_twice_then_succeeding_gets_it_on_the_third_attempt(hook, receiver):
    receiver.statuses = [500, 429, 200]
    delivery = automation_test_send(automation=hook)
    now = timezone.now()
    assert _attempt_now(delivery, now) == 5
    assert _attempt_now(delivery, now) is None  # not due yet: nothing sent
    assert _attempt_now(delivery, now + timedelta(seconds=5)) == 300
    assert _attempt_now(delivery, now + timedelta(seconds=305)) is None
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts == 3
    assert [r.headers["webhook-id"] for r in receiver.requests] == [delivery.id] * 3
    codes = DeliveryAttempt.objects.filter(delivery=delivery).order_by("attempted_at")
    assert [a.status_code for a in codes] == [500, 429, 200]


def test_a_4xx_is_final_and_a_schedule_runs_out(hook, receiver):
    receiver.statuses = [404]
    delivery = automation_test_send(automation=hook)
    assert _attempt_now(delivery) is None
    delivery.refresh_from_db()
    assert delivery.status == "failed" and delivery.attempts == 1
    receiver.statuses = [503]
    second = automation_test_send(automation=hook)
    now = timezone.now()
    _attempt_now(second, now)
    _attempt_now(second, now + timedelta(seconds=5))
    _attempt_now(second, now + timedelta(seconds=305))
    second.refresh_from_db()
    assert second.status == "failed" and second.attempts == 3


def test_replay_sends_the_same_webhook_id_again(hook, receiver):
    receiver.statuses = [400, 200]
    delivery = automation_test_send(automation=hook)
    _attempt_now(delivery)
    delivery_replay(delivery=delivery)
    _attempt_now(delivery)
    delivery.refresh_from_db()
    assert delivery.status == "delivered"
    assert [r.headers["webhook-id"] for r in receiver.requests] == [delivery.id, delivery.id]
    receiver.statuses = [400]
    failed = [automation_test_send(automation=hook) for _ in range(2)]
    for item in failed:
        _attempt_now(item)
    assert deliveries_replay_failed_since(automation=hook, since=delivery.created_at) == 2
    assert set(deliveries_due()) == {item.id for item in failed}


def test_during_a_rotation_both_secrets_sign(hook, receiver):
    old = hook.secret
    new = automation_secret_rotate(automation=hook)
    assert new != old and new.startswith("whsec_")
    delivery = automation_test_send(automation=hook)
    _attempt_now(delivery)
    (received,) = receiver.requests
    assert len(received.headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        Webhook(secret).verify(received.body, received.headers)


def test_an_endpoint_failing_every_attempt_for_five_days_is_disabled(hook, receiver):
    receiver.statuses = [500]
    delivery = automation_test_send(automation=hook)
    _attempt_now(delivery)
    assert not automation_disable_if_failing(automation=hook, now=timezone.now())
    later = timezone.now() + timedelta(days=5, minutes=1)
    assert automation_disable_if_failing(automation=hook, now=later)
    hook.refresh_from_db()
    assert not hook.enabled
    assert "failed (last: answered 500)" in hook.disabled_reason


def test_a_lease_keeps_a_second_worker_off_an_attempt_in_flight(hook, receiver):
    delivery = automation_test_send(automation=hook)
    Delivery.objects.filter(id=delivery.id).update(
        lease_until=timezone.now() + timedelta(seconds=60)
    )
    assert _attempt_now(delivery) is None
    assert receiver.requests == [] and deliveries_due() == []
    # The worker holding it died: once the lease ends, the sweep sends it again.
    later = timezone.now() + timedelta(seconds=61)
    assert deliveries_due(now=later) == [delivery.id]
    _attempt_now(delivery, later)
    assert len(receiver.requests) == 1


def test_slack_gets_a_message_with_the_flame_and_a_dashboard_link(acme, receiver):
    slack = automation_create(
        workspace=acme.workspace,
        trigger="new_account",
        url=receiver.url,
        destination=Automation.Destination.SLACK,
    )
    assert not slack.secret
    _attempt_now(automation_test_send(automation=slack))
    (received,) = receiver.requests
    message = received.json()
    assert "webhook-signature" not in received.headers
    assert message["text"] and message["blocks"]
