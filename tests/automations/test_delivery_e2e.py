"""End to end: a real automations worker killed -9 mid-delivery; the delivery is made again,
with the same webhook-id, by the next worker once its lease ends."""

import signal

import pytest
from standardwebhooks.webhooks import Webhook

from automations.delivery import deliveries_due as due_deliveries
from automations.models import Delivery
from automations.services import automation_create, automation_test_send
from automations.tasks import delivery_attempt
from tests.conftest import make_tenant
from tests.ingestion.test_e2e_worker import service_env, start, stop, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_env(broker, settings):
    settings.AUTOMATION_LEASE_SECONDS = 2
    return service_env(AUTOMATION_ALLOW_PRIVATE_URLS="true", AUTOMATION_LEASE_SECONDS="2")


def _status(delivery) -> str:
    return Delivery.objects.get(id=delivery.id).status


def _sweep() -> bool:
    """What beat's 5-second sweep does, from here: queue the due deliveries."""
    for delivery_id in due_deliveries():
        delivery_attempt.delay(delivery_id)
    return True


def _worker(env):
    return start(
        "worker",
        "--pool",
        "solo",
        "--queues",
        "automations",
        "--without-gossip",
        "--without-mingle",
        env=env,
    )


def test_a_worker_killed_mid_delivery_leaves_it_to_the_next_with_the_same_id(receiver, worker_env):
    acme = make_tenant("Acme")
    automation = automation_create(
        workspace=acme.workspace, trigger="new_account", url=receiver.url
    )
    receiver.delay = 10.0  # holds the first attempt open while its worker is killed
    delivery = automation_test_send(automation=automation)  # queued on commit
    first = _worker(worker_env)
    try:
        wait_for(lambda: len(receiver.requests) == 1)
    finally:
        stop(first, signal.SIGKILL)
    assert Delivery.objects.get(id=delivery.id).status == "pending"
    receiver.delay = 0.0
    second = _worker(worker_env)
    try:
        # The sweep (beat runs it every 5 s) finds it once the dead attempt's lease has ended.
        wait_for(lambda: _sweep() and _status(delivery) == "delivered", timeout=60)
    finally:
        stop(second)
    ids = [request.headers["webhook-id"] for request in receiver.requests]
    assert ids[0] == ids[-1] == delivery.id and len(ids) >= 2
    for request in receiver.requests:
        Webhook(automation.secret).verify(request.body, request.headers)
