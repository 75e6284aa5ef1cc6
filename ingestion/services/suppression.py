"""Dropping messages for suppressed tracking ids (erased with `suppress=true`) at the worker.

One indexed lookup per product and batch finds the product's suppressed hashes; a product with
none (nearly all) costs nothing more. Otherwise each distinct tracking id of the batch is hashed
and compared, and the matching messages are recorded in the drop log as `suppressed`, with no
value from them."""

# SQL names its session tables (ingestion/session_tables.py, fixed names); every value is a
# query parameter.
# ruff: noqa: S608

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection

from engagement.erasure import suppressed_hashes, tracking_id_hash
from ingestion import acceptance
from ingestion.models import AcceptedRequest, DroppedRequest, key_fingerprint
from ingestion.services.drops import drops_record
from ingestion.services.queue import ClaimedRequest
from ingestion.session_tables import SessionTable

# Which message fields hold a tracking id of each kind of suppression: an alias names two users,
# and one whose previousId is suppressed would store that id again (as a UserAlias) if applied.
_FIELDS = (("user", "userId"), ("user", "previousId"), ("account", "groupId"))


@dataclass(slots=True)
class Suppressed:
    product_id: int
    hashes: dict[str, frozenset[str]]
    _known: dict[tuple[str, str], bool] = field(default_factory=dict)

    def holds(self, kind: str, tracking_id: object) -> bool:
        if not isinstance(tracking_id, str) or kind not in self.hashes:
            return False
        key = (kind, tracking_id)
        if key not in self._known:
            digest = tracking_id_hash(
                product_id=self.product_id, kind=kind, tracking_id=tracking_id
            )
            self._known[key] = digest in self.hashes[kind]
        return self._known[key]

    def matches(self, message: dict) -> bool:
        return not acceptance.is_drop(message) and any(
            self.holds(kind, message.get(name)) for kind, name in _FIELDS
        )


def suppressed_lookup(product_id: int) -> Suppressed | None:
    hashes = suppressed_hashes(product_id=product_id)
    return Suppressed(product_id, hashes) if hashes else None


def _drop(
    product_id: int, endpoint: str, digest: str, received_at: datetime, count: int
) -> DroppedRequest:
    return DroppedRequest(
        product_id=product_id,
        endpoint=endpoint,
        key_fingerprint=key_fingerprint(digest),
        reason=DroppedRequest.Reason.SUPPRESSED,
        detail=f"{count} message(s) for a suppressed (erased) tracking id.",
        message_count=count,
        received_at=received_at,
    )


def messages_unsuppressed(
    product_id: int, requests: Sequence[ClaimedRequest], messages: Sequence[dict] | None = None
) -> list[dict]:
    """The requests' messages (or `messages`, all of the one request) less those for suppressed
    tracking ids, which are recorded as drops."""
    by_request: list[tuple[ClaimedRequest, Sequence[dict]]]
    if messages is None:
        messages = [m for r in requests for m in r.loaded_messages]
        by_request = [(r, r.loaded_messages) for r in requests]
    else:
        by_request = [(requests[0], messages)]
    suppressed = suppressed_lookup(product_id)
    if suppressed is None:
        return list(messages)
    drops = []
    for request, its_messages in by_request:
        count = sum(1 for m in its_messages if suppressed.matches(m))
        if count:
            drops.append(
                _drop(product_id, request.endpoint, request.key_digest, request.received_at, count)
            )
    if drops:
        drops_record(drops)
    return [m for m in messages if not suppressed.matches(m)]


def staged_suppressed_unstage(product_id: int, staged: SessionTable) -> None:
    """PostgreSQL's route: take the staged messages for suppressed tracking ids out of
    `staged` before anything reads it, and record them as drops."""
    suppressed = suppressed_lookup(product_id)
    if suppressed is None:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT COALESCE(user_tid, body->>'userId'), body->>'previousId', "
            f"COALESCE(group_tid, body->>'groupId') FROM {staged}"
        )
        found = cursor.fetchall()
        named = {u for user, previous, _ in found for u in (user, previous)}
        users = sorted(u for u in named if suppressed.holds("user", u))
        accounts = sorted({a for _, _, a in found if suppressed.holds("account", a)})
        if not users and not accounts:
            return
        cursor.execute(
            f"DELETE FROM {staged} WHERE COALESCE(user_tid, body->>'userId') = ANY(%(users)s) "
            "OR body->>'previousId' = ANY(%(users)s) "
            "OR COALESCE(group_tid, body->>'groupId') = ANY(%(accounts)s) RETURNING request_id",
            {"users": users, "accounts": accounts},
        )
        per_request = Counter(request_id for (request_id,) in cursor.fetchall())
    rows = AcceptedRequest.objects.filter(id__in=list(per_request)).only(
        "id", "endpoint", "key_digest", "received_at"
    )
    drops_record(
        [
            _drop(product_id, row.endpoint, row.key_digest, row.received_at, per_request[row.id])
            for row in rows
        ]
    )
