"""What ingestion holds about an erased user or account, removed through engagement's erasure
hook: their messages accepted but not yet applied, drop log details that quote them, and the
messageIds remembered of their messages."""

from __future__ import annotations

from django.db import connection
from django.db.models import Q

from engagement.erasure_hooks import ErasureTarget
from ingestion import acceptance
from ingestion.models import AcceptedRequest, DroppedRequest, IngestionKey, SeenMessage
from ingestion.services.dedup import seen_message_sender_hash

# Both spellings of the id fields: v2 and Segment messages, and v1's.
_ID_FIELDS = {"user": ("userId", "user_id"), "account": ("groupId", "group_id")}


def ingestion_erase(target: ErasureTarget) -> dict[str, int]:
    return {
        "accepted_messages": _accepted_messages_erase(target),
        "drop_details": _drop_details_erase(target),
        "seen_messages": _seen_messages_erase(target),
    }


def _mentions(message: dict, target: ErasureTarget) -> bool:
    if acceptance.is_drop(message):
        return False
    if any(message.get(name) == target.tracking_id for name in _ID_FIELDS[target.kind]):
        return True
    # An identify or group message names the other side too: a user's traits may hold the email.
    return bool(target.email) and target.email in str(message.get("traits") or "")


def _accepted_messages_erase(target: ErasureTarget) -> int:
    """Each message for the target waiting in the store becomes a drop marker in its place (so a
    row of several requests keeps its layout), which the drain records as `erased`."""
    digests = IngestionKey.objects.filter(product_id=target.product_id).values_list(
        "digest", flat=True
    )
    rows = AcceptedRequest.objects.filter(key_digest__in=list(digests))
    if connection.vendor == "postgresql":
        # Only rows whose JSON holds the tracking id or email anywhere: a containment test
        # per field would miss v1's names and traits.
        needles = Q(messages__icontains=target.tracking_id)
        if target.email:
            needles |= Q(messages__icontains=target.email)
        rows = rows.filter(needles)
    erased = 0
    for row in rows.select_for_update().only("id", "messages"):
        messages = [
            acceptance.drop_marker(
                DroppedRequest.Reason.ERASED, "Erased before it was applied.", index=place
            )
            if _mentions(message, target)
            else message
            for place, message in enumerate(row.messages)
        ]
        changed = sum(1 for old, new in zip(row.messages, messages, strict=True) if old != new)
        if changed:
            AcceptedRequest.objects.filter(id=row.id).update(messages=messages)
            erased += changed
    return erased


def _drop_details_erase(target: ErasureTarget) -> int:
    needles = Q(detail__contains=target.tracking_id)
    if target.email:
        needles |= Q(detail__contains=target.email)
    drops = DroppedRequest.objects.filter(needles, product_id=target.product_id)
    return drops.update(detail="(erased)")


def _seen_messages_erase(target: ErasureTarget) -> int:
    """The messageIds of the user's messages (every kind), or of the account's group calls,
    found by their sender's keyed hash; and any id that embeds the tracking id or email (rows
    written before the hashes were kept have only those). An account's users stay, so their
    tracks that named the account keep their ids. A repeat of an erased id would be applied
    again, to a person who no longer exists: it is dropped if suppressed. One scan of the
    table, with no index to keep for it on every message."""
    column = "user_hash" if target.kind == "user" else "account_hash"
    hashed = seen_message_sender_hash(target.product_id, target.tracking_id)
    needles = Q(**{column: hashed}) | Q(message_id__contains=target.tracking_id)
    if target.email:
        needles |= Q(message_id__contains=target.email)
    return SeenMessage.objects.filter(needles, product_id=target.product_id).delete()[0]
