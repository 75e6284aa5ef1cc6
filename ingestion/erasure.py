"""What ingestion holds about an erased user or account, removed through engagement's erasure
hooks: their messages accepted but not yet applied, drop log details that quote them, and the
messageIds remembered of their messages.

The waiting messages go first (`waiting_messages_erase`, at the hooks' BEFORE_TARGET stage):
a drain locks accepted rows before users and accounts, and an erasure that locked the person
first and then waited for a drain's rows deadlocked with that drain (issue 28).
"""

from __future__ import annotations

import json

from django.db import connection
from django.db.models import Q

from engagement.erasure_hooks import ErasureTarget
from ingestion import acceptance
from ingestion.backends import ingestion_backend
from ingestion.models import AcceptedRequest, DroppedRequest, IngestionKey, SeenMessage
from ingestion.services.dedup import seen_message_sender_hash

# Where a stored message names its user or account: every door stores v2's names (see
# ingestion.acceptance.messages); v1's are matched too, in case a row holds them.
_ID_FIELDS = {"user": ("userId", "user_id"), "account": ("groupId", "group_id")}


def ingestion_erase(target: ErasureTarget) -> dict[str, int]:
    return {
        "drop_details": _drop_details_erase(target),
        "seen_messages": _seen_messages_erase(target),
    }


def waiting_messages_erase(target: ErasureTarget) -> dict[str, int]:
    """Each message for the target waiting in the store becomes a drop marker in its place (so a
    row of several requests keeps its layout), which the drain records as `erased`.

    The rows are locked in id order and waited for: a drain that claimed one applies it and
    deletes it first (what it applied is then erased with the person), and drains skip the rows
    this erasure holds until it commits."""
    erased = 0
    for row_id, messages in _waiting_rows(target):
        kept = [
            acceptance.drop_marker(
                DroppedRequest.Reason.ERASED, "Erased before it was applied.", index=place
            )
            if _mentions(message, target)
            else message
            for place, message in enumerate(messages)
        ]
        changed = sum(1 for old, new in zip(messages, kept, strict=True) if old is not new)
        if changed:
            AcceptedRequest.objects.filter(id=row_id).update(messages=kept)
            erased += changed
    return {"accepted_messages": erased}


def _mentions(message: dict, target: ErasureTarget) -> bool:
    """Whether a stored message is about the target, by its parsed fields: an id field equal to
    the tracking id, or (for a user with an email) traits that quote the email anywhere, as a
    user's or an account's traits may."""
    if acceptance.is_drop(message):
        return False
    if any(message.get(name) == target.tracking_id for name in _ID_FIELDS[target.kind]):
        return True
    return bool(target.email) and _quotes(message.get("traits"), target.email)


def _quotes(value: object, text: str) -> bool:
    """Whether a name or string anywhere in `value` holds `text` (one walk, no recursion)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if text in item:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


# PostgreSQL: the rows that may hold a message for the target, locked in id order. Exact for any
# id: jsonb containment compares parsed values (an element with that id field), whatever the id
# holds; an email is looked for in the row's JSON text written the way PostgreSQL writes every
# string of it (to_jsonb(...)::text, less its quotes), so escaped characters match too. A row
# found may still hold no such message (an email quoted outside traits): _mentions decides.
_WAITING_ROWS = """
    SELECT id, messages::text FROM ingestion_acceptedrequest
    WHERE key_digest = ANY(%(digests)s::text[]) AND ({needles})
    ORDER BY id FOR UPDATE"""
_CONTAINS = "messages @> %({name})s::jsonb"
_QUOTES_EMAIL = """strpos(messages::text, (
    SELECT substr(quoted, 2, length(quoted) - 2)
    FROM (SELECT to_jsonb(%(email)s::text)::text AS quoted) AS email)) > 0"""


def _waiting_rows(target: ErasureTarget) -> list[tuple[int, list]]:
    """The product's waiting rows that may hold messages for the target, with their messages,
    locked (on PostgreSQL) in id order. Messages are parsed with the json module, as the drain
    parses them (orjson would read an integer beyond 64 bits in traits as a float)."""
    digests = list(
        IngestionKey.objects.filter(product_id=target.product_id).values_list("digest", flat=True)
    )
    return ingestion_backend().waiting_rows(target, digests)


def waiting_rows_loaded(digests: list[str]) -> list[tuple[int, list]]:
    """SQLite: one writer at a time (the erasure's transaction holds the write lock), and a
    small store: every row of the product's keys, parsed."""
    rows = AcceptedRequest.objects.filter(key_digest__in=digests).order_by("id")
    return list(rows.values_list("id", "messages"))


def waiting_rows_matching(target: ErasureTarget, digests: list[str]) -> list[tuple[int, list]]:
    """PostgreSQL: only the rows whose JSON may name the target, locked in id order."""
    params: dict = {"digests": digests}
    needles = []
    for number, name in enumerate(_ID_FIELDS[target.kind]):
        params[f"id{number}"] = json.dumps([{name: target.tracking_id}])
        needles.append(_CONTAINS.format(name=f"id{number}"))
    if target.email:
        params["email"] = target.email
        needles.append(_QUOTES_EMAIL)
    with connection.cursor() as cursor:
        cursor.execute(_WAITING_ROWS.format(needles=" OR ".join(needles)), params)
        return [(row_id, json.loads(text)) for row_id, text in cursor.fetchall()]


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
