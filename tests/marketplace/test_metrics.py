"""Marketplace's metrics: runs counted by how they ended, each connection's state as a gauge
per state, and its last successful sync time."""

from datetime import timedelta

from django.utils import timezone
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from marketplace import services, sync
from marketplace.metrics import ConnectionCollector
from marketplace.models import MarketplaceConnection, SyncRun
from tests.marketplace.conftest import (
    LICENSES_URL,
    cloud_license,
    connect,
    license_page,
    run_until_done,
)


def scrape() -> CollectorRegistry:
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    registry.register(ConnectionCollector())
    return registry


def sync_once(tenant) -> SyncRun:
    connection = connect(tenant)
    return run_until_done(SyncRun.objects.filter(connection=connection).first().id)


def runs(outcome: str) -> float:
    return scrape().get_sample_value("eds_marketplace_syncs_total", {"outcome": outcome}) or 0


def test_a_successful_sync_is_counted_and_its_time_exposed(acme, mocked):
    mocked.get(LICENSES_URL, json=license_page([cloud_license("cloud-a")]))
    before = runs("succeeded")

    assert sync_once(acme).outcome == SyncRun.Outcome.SUCCEEDED

    assert runs("succeeded") >= before + 1
    connection = MarketplaceConnection.objects.get(product=acme.product)
    product = str(acme.product.id)
    registry = scrape()
    last = registry.get_sample_value(
        "eds_marketplace_last_success_timestamp_seconds", {"product": product}
    )
    assert last == connection.last_success_at.timestamp()
    state = {"product": product, "state": "active"}
    assert registry.get_sample_value("eds_marketplace_connection_state", state) == 1


def test_a_connection_that_needs_authentication_shows_in_its_state(acme, mocked):
    mocked.get(LICENSES_URL, status=401)
    before = runs("unauthorized")

    assert sync_once(acme).outcome == SyncRun.Outcome.UNAUTHORIZED

    assert runs("unauthorized") >= before + 1
    registry = scrape()
    product = str(acme.product.id)
    states = {
        state: registry.get_sample_value(
            "eds_marketplace_connection_state", {"product": product, "state": state}
        )
        for state in MarketplaceConnection.State.values
    }
    assert states == {
        "not_configured": 0,
        "active": 0,
        "requires_authentication": 1,
        "disconnected": 0,
    }
    last = {"product": product}
    assert registry.get_sample_value("eds_marketplace_last_success_timestamp_seconds", last) is None


def test_runs_closed_by_disconnect_or_by_saving_the_details_again_are_counted(acme, mocked):
    before = {outcome: runs(outcome) for outcome in ("superseded", "disconnected")}
    connection = connect(acme)  # its first run waits for a worker
    connect(acme)  # saved again: that run is closed, another starts

    assert services.connections_disconnect(connection_ids=[connection.id]) == 1

    outcomes = SyncRun.objects.filter(connection=connection).values_list("outcome", flat=True)
    assert list(outcomes) == [SyncRun.Outcome.STOPPED] * 2
    assert runs("superseded") == before["superseded"] + 1
    assert runs("disconnected") == before["disconnected"] + 1


def test_a_run_whose_worker_died_is_counted_as_abandoned_when_the_sweep_closes_it(acme, mocked):
    connection = connect(acme)
    run = SyncRun.objects.get(connection=connection)
    assert sync.lease_acquire(connection.id, "dead-worker")
    past = timezone.now() - timedelta(seconds=1)
    SyncRun.objects.filter(id=run.id).update(heartbeat_at=past, retry_at=past)
    MarketplaceConnection.objects.filter(id=connection.id).update(sync_lease_until=past)
    before = runs("abandoned")

    assert services.sync_runs_close_dead() == 1

    assert runs("abandoned") == before + 1
    assert services.sync_runs_close_dead() == 0
    assert runs("abandoned") == before + 1
