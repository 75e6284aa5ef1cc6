"""Ingestion writes: keys, draining the acceptance store into the domain, the record of drops."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.db import OperationalError, transaction
from django.utils import timezone

from engagement import services as engagement_services
from engagement.services import Message
from ingestion.models import AcceptedRequest, DroppedRequest, IngestionKey

logger = logging.getLogger(__name__)


def ingestion_key_create(*, product_id: int, label: str = "") -> IngestionKey:
    return IngestionKey.objects.create(product_id=product_id, label=label)


def ingestion_key_revoke(*, key_id: int) -> IngestionKey:
    key = IngestionKey.objects.get(id=key_id)
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


def _to_domain(message: dict) -> Message:
    return Message(
        kind=message["type"],
        timestamp_ms=message["timestamp"],
        user_id=message.get("userId"),
        group_id=message.get("groupId"),
        event=message.get("event"),
        traits=message.get("traits"),
    )


def _drop(row: AcceptedRequest, reason: str, *, product_id: int | None, detail: str = ""):
    return DroppedRequest(
        product_id=product_id,
        endpoint=row.endpoint,
        reason=reason,
        detail=detail[:500],
        message_count=len(row.messages),
        received_at=row.received_at,
    )


def _apply_rows(product_id: int, rows: Sequence[AcceptedRequest]) -> list[DroppedRequest]:
    """Apply one product's rows together; if that fails, row by row, so one bad row is dropped
    with its reason instead of holding the whole backlog back."""
    messages = [_to_domain(m) for row in rows for m in row.messages]
    try:
        with transaction.atomic():
            engagement_services.messages_apply(product_id=product_id, messages=messages)
        return []
    except OperationalError:
        raise  # the database itself is in trouble: leave the rows for the next drain
    except Exception:
        if len(rows) == 1:
            logger.exception("dropping accepted request %s: it cannot be applied", rows[0].id)
            return [
                _drop(
                    rows[0],
                    DroppedRequest.Reason.APPLY_FAILED,
                    product_id=product_id,
                    detail="The request could not be applied; see the worker log.",
                )
            ]
    drops: list[DroppedRequest] = []
    for row in rows:
        drops.extend(_apply_rows(product_id, [row]))
    return drops


@dataclass(frozen=True, slots=True)
class DrainResult:
    requests: int
    dropped: int


def accepted_requests_drain(*, limit: int) -> DrainResult:
    """Claim up to `limit` accepted requests, apply them, and delete them, in one transaction.

    Claimed rows are locked (SKIP LOCKED on PostgreSQL), so any number of workers can drain at
    once; a worker that dies mid-way leaves its rows unclaimed for the next drain.
    """
    with transaction.atomic():
        rows = list(
            AcceptedRequest.objects.select_for_update(skip_locked=True).order_by("id")[:limit]
        )
        if not rows:
            return DrainResult(0, 0)
        keys = {
            key.digest: key
            for key in IngestionKey.objects.filter(digest__in={row.key_digest for row in rows})
        }
        drops: list[DroppedRequest] = []
        by_product: dict[int, list[AcceptedRequest]] = defaultdict(list)
        for row in rows:
            key = keys.get(row.key_digest)
            if key is None:
                drops.append(
                    _drop(
                        row,
                        DroppedRequest.Reason.UNKNOWN_KEY,
                        product_id=None,
                        detail="No product has this ingestion key.",
                    )
                )
            elif key.revoked_at is not None and key.revoked_at <= row.received_at:
                drops.append(
                    _drop(
                        row,
                        DroppedRequest.Reason.REVOKED_KEY,
                        product_id=key.product_id,
                        detail=f"Key {key.key[:6]}… was revoked at {key.revoked_at}.",
                    )
                )
            else:
                by_product[key.product_id].append(row)
        for product_id, product_rows in by_product.items():
            drops.extend(_apply_rows(product_id, product_rows))
        if drops:
            DroppedRequest.objects.bulk_create(drops)
        AcceptedRequest.objects.filter(id__in=[row.id for row in rows]).delete()
    return DrainResult(len(rows), len(drops))


def accepted_requests_drain_for(*, seconds: float, batch: int) -> tuple[DrainResult, bool]:
    """Drain batches until the store is empty or `seconds` pass; say whether work is left."""
    deadline = time.monotonic() + seconds
    requests = dropped = 0
    while True:
        result = accepted_requests_drain(limit=batch)
        requests += result.requests
        dropped += result.dropped
        if result.requests < batch:
            return DrainResult(requests, dropped), False
        if time.monotonic() >= deadline:
            return DrainResult(requests, dropped), True


def drops_purge(*, older_than_days: int) -> int:
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted, _ = DroppedRequest.objects.filter(dropped_at__lt=cutoff).delete()
    return deleted
