"""Deliveries reach a real local receiver, signed, retried on the schedule, and on record."""

import socket
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from automations import delivery as delivery_module
from automations.delivery import (
    automation_disable_if_failing,
    deliveries_due,
    deliveries_replay_failed_since,
    delivery_attempt,
    delivery_replay,
)
from automations.models import Automation, Delivery, DeliveryAttempt
from automations.services import (
    automation_create,
    automation_secret_rotate,
    automation_switch_off,
    automation_test_send,
    automation_update,
    delivery_id_new,
)

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
    delivery.refresh_from_db()
    assert delivery.status == "cancelled"  # its retries stop with it


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


def _closed_port() -> int:
    """A local port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_switched_off_automation_sends_none_of_its_pending_retries(hook, receiver):
    receiver.statuses = [500]
    delivery = automation_test_send(automation=hook)
    now = timezone.now()
    assert _attempt_now(delivery, now) == 5  # retrying, next in 5 s

    assert automation_switch_off(automation=hook, reason="Switched off by a test.") == 1

    delivery.refresh_from_db()
    assert delivery.status == "cancelled" and delivery.finished_at is not None
    later = now + timedelta(days=2)  # past the whole schedule
    assert deliveries_due(now=later) == []
    assert _attempt_now(delivery, later) is None
    assert len(receiver.requests) == 1
    assert DeliveryAttempt.objects.filter(delivery=delivery).count() == 1


def test_a_delivery_leased_after_the_switch_off_is_never_attempted(hook, receiver):
    automation_switch_off(automation=hook, reason="Switched off by a test.")
    # Made by a refresh that read the automation as on just before the switch-off committed.
    now = timezone.now()
    late = Delivery.objects.create(
        id=delivery_id_new(),
        automation=hook,
        event_type="automation.test",
        payload={"type": "automation.test", "data": {}},
        next_attempt_at=now,
        created_at=now,
    )

    assert _attempt_now(late) is None

    assert receiver.requests == []
    late.refresh_from_db()
    assert late.status == "cancelled" and late.attempts == 0


def test_switching_back_on_does_not_resurrect_cancelled_deliveries(hook, receiver):
    receiver.statuses = [500, 200]
    delivery = automation_test_send(automation=hook)
    _attempt_now(delivery)
    automation_switch_off(automation=hook, reason="Switched off by a test.")

    automation_update(automation=hook, enabled=True)

    later = timezone.now() + timedelta(days=2)
    assert deliveries_due(now=later) == []
    assert _attempt_now(delivery, later) is None
    assert Delivery.objects.get(id=delivery.id).status == "cancelled"
    # Sent again only when a person replays it.
    delivery_replay(delivery=delivery)
    _attempt_now(delivery)
    assert Delivery.objects.get(id=delivery.id).status == "delivered"
    assert len(receiver.requests) == 2


def test_a_timed_out_attempt_records_the_time_it_took(hook, receiver, monkeypatch):
    monkeypatch.setattr(delivery_module, "ATTEMPT_DEADLINE_SECONDS", 0.5)
    receiver.delay = 1.5
    delivery = automation_test_send(automation=hook)

    assert _attempt_now(delivery) == 5  # a timeout is retried

    attempt = DeliveryAttempt.objects.get(delivery=delivery)
    assert attempt.status_code is None and "no answer" in attempt.error
    assert attempt.latency_ms >= 500


def test_a_refused_connection_records_the_time_it_took(acme, receiver):
    refused = automation_create(
        workspace=acme.workspace,
        trigger="new_account",
        url=f"http://127.0.0.1:{_closed_port()}/hooks",
    )
    delivery = automation_test_send(automation=refused)
    started = time.monotonic()

    _attempt_now(delivery)

    took_ms = (time.monotonic() - started) * 1000
    attempt = DeliveryAttempt.objects.get(delivery=delivery)
    assert attempt.status_code is None and attempt.error
    assert 1 <= attempt.latency_ms <= took_ms + 1


def _in_another_session(work, *args) -> threading.Thread:
    def run() -> None:
        try:
            work(*args)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_an_attempt_waiting_on_a_switch_off_in_progress_starts_nothing(hook, receiver):
    delivery = automation_test_send(automation=hook)
    switching = threading.Event()
    commit = threading.Event()

    def switch_off_slowly() -> None:
        with transaction.atomic():
            automation_switch_off(automation=hook, reason="Switched off by a test.")
            switching.set()
            commit.wait(10)

    thread = _in_another_session(switch_off_slowly)
    assert switching.wait(10)
    # The lease waits on the switch-off's row lock, then sees the automation off.
    threading.Timer(0.5, commit.set).start()
    started = time.monotonic()
    try:
        assert _attempt_now(delivery) is None
    finally:
        commit.set()
        thread.join(10)

    assert time.monotonic() - started >= 0.4  # it waited for the switch-off to commit
    assert receiver.requests == []
    assert Delivery.objects.get(id=delivery.id).status == "cancelled"


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_an_attempt_in_flight_at_the_switch_off_is_recorded_and_not_retried(hook, receiver):
    receiver.statuses = [500]
    receiver.delay = 1.0
    delivery = automation_test_send(automation=hook)
    outcome: list[float | None] = []
    thread = _in_another_session(lambda: outcome.append(_attempt_now(delivery)))
    deadline = time.monotonic() + 10
    while not receiver.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert receiver.requests  # the attempt is in flight

    assert automation_switch_off(automation=hook, reason="Switched off by a test.") == 1
    thread.join(10)

    assert outcome == [None]  # no retry scheduled
    delivery.refresh_from_db()
    assert delivery.status == "cancelled" and delivery.attempts == 1
    assert DeliveryAttempt.objects.get(delivery=delivery).status_code == 500
    assert deliveries_due(now=timezone.now() + timedelta(days=2)) == []
