"""Marketplace's Prometheus metrics: sync runs by how they ended, and (read at scrape time) each
connection's state, last successful sync and the age of its API token."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import BooleanField, ExpressionWrapper, Q
from django.utils import timezone
from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from marketplace.models import MarketplaceConnection
from marketplace.selectors import TOKEN_WARN_DAYS

SYNC_RUNS = Counter(
    "eds_marketplace_syncs_total",
    "Marketplace sync runs closed, by outcome (succeeded, failed, unauthorized, stopped by the "
    "worker; superseded, disconnected, abandoned when closed elsewhere).",
    ["outcome"],
)

# Runs closed outside a worker, labelled by why: their stored outcome (stopped or failed) is
# also what a worker records for the marketplace's own refusals, which an alert must tell apart.
SUPERSEDED = "superseded"  # the connection's details were saved again
DISCONNECTED = "disconnected"
ABANDONED = "abandoned"  # its worker or its task died (the dead-run sweep, or the next request)


def sync_run_finished(outcome: str, runs: int = 1) -> None:
    if runs:
        SYNC_RUNS.labels(outcome).inc(runs)


class ConnectionCollector(Collector):
    """Per connection (labelled by its product), its state as a 1/0 gauge per possible state,
    and the time of its last successful sync."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state = GaugeMetricFamily(
            "eds_marketplace_connection_state",
            "1 for the connection's current state, 0 for the others.",
            labels=["product", "state"],
        )
        last_success = GaugeMetricFamily(
            "eds_marketplace_last_success_timestamp_seconds",
            "Unix time of the connection's last successful sync (absent before the first).",
            labels=["product"],
        )
        token_age = GaugeMetricFamily(
            "eds_marketplace_token_age_days",
            "Whole days since the connection's API token was set (absent without a token); "
            "Atlassian API tokens expire within a year, the service warns from "
            f"{TOKEN_WARN_DAYS} days.",
            labels=["product"],
        )
        today = timezone.localdate()
        # Whether a token is stored, without decrypting it (an erased token is stored as NULL).
        has_token = ExpressionWrapper(Q(api_token__isnull=False), output_field=BooleanField())
        rows = MarketplaceConnection.objects.annotate(has_token=has_token).values_list(
            "product_id", "state", "last_success_at", "token_set_on", "has_token"
        )
        for product_id, current, succeeded_at, token_set_on, token in rows:
            product = str(product_id)
            for choice in MarketplaceConnection.State.values:
                state.add_metric([product, choice], 1.0 if choice == current else 0.0)
            if succeeded_at is not None:
                last_success.add_metric([product], succeeded_at.timestamp())
            if token and token_set_on is not None:
                token_age.add_metric([product], float((today - token_set_on).days))
        yield state
        yield last_success
        yield token_age
