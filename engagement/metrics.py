"""Engagement's Prometheus metrics: how long score refreshes take, and (read from ScoringState
at scrape time) how far behind each workspace's scores are."""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client import Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from engagement.models import ScoringState

SCORE_REFRESH_SECONDS = Histogram(
    "eds_score_refresh_duration_seconds",
    "Time a workspace's score refresh took, by what it did: full, incremental, idle, busy.",
    ["mode"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)


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
            family.add_metric([str(workspace_id)], max((now - scored_through).total_seconds(), 0))
        yield family
