"""Ingestion's Prometheus metrics: what the drain applies and drops, how long its batches take,
and (read from the database at scrape time) the accepted requests still waiting.

Counters and histograms live in prometheus_client's default registry, backed by files in
PROMETHEUS_MULTIPROC_DIR, so the web server exposes what every worker process counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime

from django.db.models import Min, Sum
from django.utils import timezone
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ingestion.models import AcceptedRequest

MESSAGES_APPLIED = Counter(
    "eds_ingestion_messages_applied_total",
    "Messages a drain applied to engagement's data.",
)
MESSAGES_DROPPED = Counter(
    "eds_ingestion_messages_dropped_total",
    "Messages a drain recorded as dropped (accepted, then not applied), by reason.",
    ["reason"],
)
DRAIN_BATCH_SECONDS = Histogram(
    "eds_ingestion_drain_batch_duration_seconds",
    "Time one drain transaction took to claim, apply and delete a batch (empty claims excluded).",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)


def drain_batch_observe(
    *, seconds: float, messages: int, dropped: Iterable[tuple[str, int]]
) -> None:
    """Count one committed drain batch: `messages` claimed, `dropped` as (reason, messages)."""
    dropped_messages = 0
    for reason, count in dropped:
        MESSAGES_DROPPED.labels(reason).inc(count)
        dropped_messages += count
    MESSAGES_APPLIED.inc(max(messages - dropped_messages, 0))
    DRAIN_BATCH_SECONDS.observe(seconds)


class BacklogCollector(Collector):
    """Accepted requests waiting for a drain, and the age of the oldest, from the database at
    scrape time: a sum over the table and one read of the received_at index."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        waiting, oldest = _backlog()
        yield GaugeMetricFamily(
            "eds_ingestion_requests_waiting",
            "Accepted requests stored and not yet applied by a drain.",
            value=waiting,
        )
        age = 0.0 if oldest is None else max((timezone.now() - oldest).total_seconds(), 0.0)
        yield GaugeMetricFamily(
            "eds_ingestion_oldest_waiting_age_seconds",
            "Age of the oldest accepted request not yet applied (0 when none waits).",
            value=age,
        )


def _backlog() -> tuple[int, datetime | None]:
    # The same sum the doors run every second to check the backlog limit.
    found = AcceptedRequest.objects.aggregate(
        waiting=Sum("request_count"), oldest=Min("received_at")
    )
    return int(found["waiting"] or 0), found["oldest"]
