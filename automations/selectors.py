"""Reads of automations and their record, for the dashboard and the commands."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q

from automations.models import Automation, Delivery, DeliveryAttempt, TraitSync, TraitSyncRun


@dataclass(frozen=True, slots=True)
class DeliveryShown:
    id: str  # the webhook-id
    event_type: str
    status: str  # delivered, retrying (pending included), failed or cancelled
    attempts: int  # every attempt on record, replays included
    created_at: datetime
    next_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str


def delivery_list(*, automation: Automation, limit: int = 100) -> list[DeliveryShown]:
    deliveries = list(
        automation.deliveries.order_by("-created_at", "-id").annotate(
            attempt_count=Count("attempt_rows")
        )[:limit]
    )
    last: dict[str, DeliveryAttempt] = {}
    for attempt in DeliveryAttempt.objects.filter(delivery__in=deliveries).order_by(
        "attempted_at", "id"
    ):
        last[attempt.delivery_id] = attempt
    return [
        DeliveryShown(
            id=item.id,
            event_type=item.event_type,
            status=item.shown_status,
            attempts=item.attempt_count,
            created_at=item.created_at,
            next_attempt_at=item.next_attempt_at
            if item.status in (Delivery.Status.PENDING, Delivery.Status.RETRYING)
            else None,
            last_status_code=last[item.id].status_code if item.id in last else None,
            last_error=last[item.id].error if item.id in last else "",
        )
        for item in deliveries
    ]


def delivery_attempts(*, delivery: Delivery) -> list[DeliveryAttempt]:
    return list(delivery.attempt_rows.order_by("attempted_at", "id"))


@dataclass(frozen=True, slots=True)
class AutomationShown:
    automation: Automation
    delivered: int
    retrying: int
    failed: int
    cancelled: int  # pending or retrying when the automation was switched off


def automation_list(*, workspace_id: int) -> list[AutomationShown]:
    rows = (
        Automation.objects.filter(workspace_id=workspace_id)
        .select_related("segment")
        .annotate(
            delivered=Count("deliveries", filter=Q(deliveries__status="delivered")),
            retrying=Count("deliveries", filter=Q(deliveries__status__in=["pending", "retrying"])),
            failed=Count("deliveries", filter=Q(deliveries__status="failed")),
            cancelled=Count("deliveries", filter=Q(deliveries__status="cancelled")),
        )
        .order_by("id")
    )
    return [
        AutomationShown(row, row.delivered, row.retrying, row.failed, row.cancelled) for row in rows
    ]


@dataclass(frozen=True, slots=True)
class TraitSyncShown:
    sync: TraitSync
    last_run: TraitSyncRun | None


def trait_sync_list(*, workspace_id: int) -> list[TraitSyncShown]:
    syncs = list(TraitSync.objects.filter(workspace_id=workspace_id).order_by("id"))
    return [TraitSyncShown(sync, sync.runs.order_by("-started_at").first()) for sync in syncs]
