"""The drop log: what a drain could not apply and why, recorded in the drain's transaction and
purged after INGESTION_DROP_RETENTION_DAYS."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, timedelta

from django.utils import timezone

from engagement.hierarchy import RefusedParent
from ingestion import acceptance
from ingestion.backends import ingestion_backend
from ingestion.models import AnonymousDay, DroppedRequest, IngestionKey, key_fingerprint
from ingestion.pg_copy import copy_rows
from ingestion.services.queue import ClaimedRequest

_DETAIL_MAX = 500


def key_drop(request: ClaimedRequest, key: IngestionKey | None) -> DroppedRequest | None:
    """The drop of a request whose key no product has, or was revoked by the time it came."""
    if key is None:
        return _request_drop(
            request,
            DroppedRequest.Reason.UNKNOWN_KEY,
            product_id=None,
            detail="No product has this ingestion key.",
        )
    if key.revoked_at is not None and key.revoked_at <= request.received_at:
        return _request_drop(
            request,
            DroppedRequest.Reason.REVOKED_KEY,
            product_id=key.product_id,
            detail=f"Key {key.key[:6]}… was revoked at {key.revoked_at}.",
        )
    return None


def _request_drop(
    request: ClaimedRequest, reason: str, *, product_id: int | None, detail: str
) -> DroppedRequest:
    return DroppedRequest(
        product_id=product_id,
        endpoint=request.endpoint,
        key_fingerprint=key_fingerprint(request.key_digest),
        reason=reason,
        detail=detail[:_DETAIL_MAX],
        message_count=request.message_count,
        received_at=request.received_at,
    )


def marker_drops(request: ClaimedRequest, product_id: int) -> list[DroppedRequest]:
    """The items the acceptance rules left out of a request (drop markers), as drops of one
    message each. A request claimed without its messages has none."""
    if request.messages is None:
        return []
    return [
        DroppedRequest(
            product_id=product_id,
            endpoint=request.endpoint,
            key_fingerprint=key_fingerprint(request.key_digest),
            reason=marker["reason"],
            detail=marker.get("detail", "")[:_DETAIL_MAX],
            message_count=1,
            item_index=marker.get("index"),
            received_at=request.received_at,
        )
        for marker in request.messages
        if acceptance.is_drop(marker)
    ]


def apply_failed_drop(
    request: ClaimedRequest, product_id: int, items: list[tuple[int, dict]], error: Exception
) -> DroppedRequest:
    """The drop of messages of a request that cannot be applied: one (its place in the request
    as `item_index`), or a part the search ran out of tries in (`item_index` its first). The
    request's endpoint and time; the detail names message types, never a value from the
    messages."""
    first, last = items[0][0], items[-1][0]
    if len(items) == 1:
        message_type = items[0][1].get("type")
        label = message_type[:20] if isinstance(message_type, str) else "message"
        what = f"Item {first} ({label})"
        outcome = "it was dropped alone, not with its request"
    else:
        what = f"Items {first} to {last} ({len(items)} messages)"
        outcome = (
            "the search for the bad ones among them ran out of tries; the request's other "
            "messages were applied"
        )
    return DroppedRequest(
        product_id=product_id,
        endpoint=request.endpoint,
        key_fingerprint=key_fingerprint(request.key_digest),
        reason=DroppedRequest.Reason.APPLY_FAILED,
        detail=(
            f"{what} of the request could not be applied ({type(error).__name__}); {outcome}. "
            "See the worker log."
        )[:_DETAIL_MAX],
        message_count=len(items),
        item_index=first,
        received_at=request.received_at,
    )


def parent_refused_drop(
    request: ClaimedRequest, product_id: int, refused: RefusedParent
) -> DroppedRequest:
    """The drop of an account's parent link (a group call's `parent_group_id`) that would have
    closed a cycle or made the chain too deep; the call's other changes were applied."""
    return DroppedRequest(
        product_id=product_id,
        endpoint=request.endpoint,
        key_fingerprint=key_fingerprint(request.key_digest),
        reason=DroppedRequest.Reason.PARENT_REFUSED,
        detail=refused.detail[:_DETAIL_MAX],
        message_count=1,
        received_at=request.received_at,
    )


_DROP_COLUMNS = (
    "product_id",
    "endpoint",
    "key_fingerprint",
    "reason",
    "detail",
    "message_count",
    "item_index",
    "received_at",
    "dropped_at",
)


def drops_record(drops: list[DroppedRequest]) -> None:
    """Store the drops of a drain (the backend's way: one COPY on PostgreSQL); anonymous
    messages are counted per product, key and day instead (AnonymousDay)."""
    anonymous: Counter[tuple[int, str, date]] = Counter()
    logged = []
    for drop in drops:
        if drop.reason == acceptance.DROP_ANONYMOUS:
            # A drop's product is None only for an unknown key, never for an anonymous message.
            assert drop.product_id is not None
            day = drop.received_at.astimezone(UTC).date()
            anonymous[(drop.product_id, drop.key_fingerprint, day)] += drop.message_count
        else:
            logged.append(drop)
    if logged:
        ingestion_backend().drops_record(logged)
    AnonymousDay.objects.bulk_create(
        AnonymousDay(product_id=product_id, key_fingerprint=fingerprint, day=day, messages=count)
        for (product_id, fingerprint, day), count in anonymous.items()
    )


def drops_copy(drops: list[DroppedRequest]) -> None:
    """PostgreSQL: the drops in one COPY. A sender whose key was revoked can send as fast as
    anyone, and the ORM's bulk_create costs about 60 µs a drop."""
    now = timezone.now()
    copy_rows(
        DroppedRequest,
        _DROP_COLUMNS,
        (
            (
                d.product_id,
                d.endpoint,
                d.key_fingerprint,
                d.reason,
                d.detail,
                d.message_count,
                d.item_index,
                d.received_at,
                now,
            )
            for d in drops
        ),
    )


def drops_purge(*, older_than_days: int) -> int:
    cutoff = timezone.now() - timedelta(days=older_than_days)
    AnonymousDay.objects.filter(day__lt=cutoff.date()).delete()
    deleted, _ = DroppedRequest.objects.filter(dropped_at__lt=cutoff).delete()
    return deleted
