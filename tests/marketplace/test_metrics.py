"""Marketplace's metrics: runs counted by how they ended, each connection's state as a gauge
per state, and its last successful sync time."""

from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

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
