"""Engagement's Prometheus metrics: how long score refreshes take, and, read at scrape time, how
far behind each workspace's scores are and where erasure requests stand."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from engagement.models import Erasure, ScoringState
from engagement.scoring.refresh import RefreshResult

SCORE_REFRESH_SECONDS = Histogram(
    "eds_score_refresh_duration_seconds",
    "Time a workspace's score refresh took, by what it did: full, incremental, idle, busy.",
    ["mode"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
SCORE_REFRESH_WAIT_SECONDS = Histogram(
    "eds_score_refresh_wait_seconds",
    "Time from a change queuing a workspace's refresh to its start: the refresh delay, then any "
    "wait for a worker or for the refresh before it.",
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
# Over the refreshes' count, the work each one did: an incremental refresh's time grows with the
# users and accounts it recomputes (docs/scoring.md).
SCORE_REFRESH_RECOMPUTED = Counter(
    "eds_score_refresh_recomputed",
    "Users and accounts score refreshes recomputed, by what the refresh did and by kind.",
    ["mode", "kind"],
)


def score_refresh_observed(result: RefreshResult, seconds: float) -> None:
    """A refresh's time, and the users and accounts it recomputed."""
    SCORE_REFRESH_SECONDS.labels(result.mode).observe(seconds)
    if result.users or result.accounts:
        SCORE_REFRESH_RECOMPUTED.labels(result.mode, "user").inc(result.users)
        SCORE_REFRESH_RECOMPUTED.labels(result.mode, "account").inc(result.accounts)


class ScoresAgeCollector(Collector):
    """Per workspace, the age of its scores: the time since the instant they reflect all data
    up to (ScoringState.scored_through). Even an idle workspace's watermark moves on every
    SCORING_ACTIVITY_KEEP_MINUTES / 2 or so, so a steadily growing age means refreshes stopped."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "eds_scores_age_seconds",
            "Seconds since the instant up to which the workspace's scores reflect its data.",
            labels=["workspace"],
        )
        now = timezone.now()
        rows = ScoringState.objects.exclude(scored_through=None).values_list(
            "workspace_id", "scored_through"
        )
        for workspace_id, scored_through in rows:
            if scored_through is None:  # excluded above; the column is nullable
                continue
            family.add_metric([str(workspace_id)], max((now - scored_through).total_seconds(), 0))
        yield family


class ErasuresCollector(Collector):
    """Erasure requests by status (every status listed, 0 included), and how long the oldest
    unfinished one has waited: one grouped count over the status index."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        by_status = GaugeMetricFamily(
            "eds_erasures",
            "Erasure requests (users and accounts to delete) by status.",
            labels=["status"],
        )
        counts = dict(
            Erasure.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n")
        )
        for status in Erasure.Status.values:
            by_status.add_metric([status], counts.get(status, 0))
        yield by_status
        unfinished = (Erasure.Status.PENDING, Erasure.Status.RUNNING)
        oldest = Erasure.objects.filter(status__in=unfinished).aggregate(at=Min("requested_at"))
        age = 0.0
        if oldest["at"] is not None:
            age = max((timezone.now() - oldest["at"]).total_seconds(), 0.0)
        yield GaugeMetricFamily(
            "eds_erasure_oldest_unfinished_age_seconds",
            "Age of the oldest erasure request still pending or running (0 when none).",
            value=age,
        )
