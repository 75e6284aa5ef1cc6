"""Ingestion's report to engagement.health: what was accepted, what waits, what was dropped."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Max, Min, Q, Sum
from django.db.models.functions import Coalesce

from engagement.health import (
    AnonymousCount,
    Backlog,
    DropSummary,
    IngestionHealth,
    KeyActivity,
    MinuteCount,
)
from ingestion.models import (
    AcceptedMinute,
    AcceptedRequest,
    AnonymousDay,
    DroppedRequest,
    IngestionKey,
)

# A product's drop log can be long (a revoked key still sending): the page lists the groups
# with the most drops.
DROP_GROUPS_SHOWN = 50


def ingestion_health_for(
    product_id: int, since: datetime, include_unattributed: bool
) -> IngestionHealth:
    keys = list(IngestionKey.objects.filter(product_id=product_id).order_by("-created_at"))
    digests = [key.digest for key in keys]
    tallies = AcceptedMinute.objects.filter(key_digest__in=digests)
    per_minute = [
        MinuteCount(minute=row["minute"], requests=row["requests"])
        for row in tallies.filter(minute__gte=since.replace(second=0, microsecond=0))
        .values("minute")
        .annotate(requests=Sum("requests"))
        .order_by("minute")
    ]
    backlog_rows = AcceptedRequest.objects.filter(key_digest__in=digests)
    backlog = backlog_rows.aggregate(
        requests=Coalesce(Sum("request_count"), 0), oldest=Min("received_at")
    )
    last_applied = dict(
        tallies.values("key_digest")
        .annotate(last=Max("last_received_at"))
        .values_list("key_digest", "last")
    )
    last_waiting = dict(
        backlog_rows.values("key_digest")
        .annotate(last=Max("received_at"))
        .values_list("key_digest", "last")
    )
    summaries = _drop_summaries(product_id, since, include_unattributed)
    return IngestionHealth(
        since=since,
        accepted_per_minute=per_minute,
        backlog=Backlog(requests=backlog["requests"], oldest_received_at=backlog["oldest"]),
        drops=summaries,
        keys=[
            KeyActivity(
                label=key.label,
                fingerprint=key.fingerprint,
                active=key.is_active,
                created_at=key.created_at,
                last_request_at=max(
                    (t for t in (last_applied.get(key.digest), last_waiting.get(key.digest)) if t),
                    default=None,
                ),
                key_id=key.id,
                allowed_origins=key.allowed_origins,
            )
            for key in keys
        ],
        anonymous=_anonymous_counts(product_id, since),
    )


def _anonymous_counts(product_id: int, since: datetime) -> list[AnonymousCount]:
    """Anonymous messages per key and day, from the day `since` falls in."""
    rows = (
        AnonymousDay.objects.filter(product_id=product_id, day__gte=since.date())
        .values("key_fingerprint", "day")
        .annotate(messages=Sum("messages"))
        .order_by("-day", "key_fingerprint")
    )
    return [AnonymousCount(row["key_fingerprint"], row["day"], row["messages"]) for row in rows]


def _drop_summaries(
    product_id: int, since: datetime, include_unattributed: bool
) -> list[DropSummary]:
    """The most frequent kinds of drop since `since`, each with its latest detail."""
    drops = DroppedRequest.objects.filter(dropped_at__gte=since)
    scope = Q(product_id=product_id)
    if include_unattributed:
        scope |= Q(product__isnull=True)
    labels = dict(DroppedRequest.Reason.choices)
    groups = (
        drops.filter(scope)
        .values("reason", "key_fingerprint", "endpoint")
        .annotate(
            drops=Count("id"), messages=Sum("message_count"), last_dropped_at=Max("dropped_at")
        )
        .order_by("-drops", "reason", "key_fingerprint", "endpoint")[:DROP_GROUPS_SHOWN]
    )
    summaries = []
    for group in groups:
        last = (
            drops.filter(scope)
            .filter(
                reason=group["reason"],
                key_fingerprint=group["key_fingerprint"],
                endpoint=group["endpoint"],
            )
            .order_by("-dropped_at")
            .values_list("detail", flat=True)
            .first()
        )
        summaries.append(
            DropSummary(
                reason=group["reason"],
                reason_label=labels.get(group["reason"], group["reason"]),
                key_fingerprint=group["key_fingerprint"],
                endpoint=group["endpoint"],
                drops=group["drops"],
                messages=group["messages"] or 0,
                last_dropped_at=group["last_dropped_at"],
                last_detail=last or "",
            )
        )
    return summaries
