"""Ingestion writes: keys, draining the acceptance store into the domain, the record of drops."""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import OperationalError, connection, transaction
from django.utils import timezone

from engagement import services as engagement_services
from engagement.services import Message
from ingestion import core
from ingestion.models import (
    AcceptedRequest,
    DroppedRequest,
    IngestionKey,
    SeenMessage,
    seen_message_key,
)

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


def _drop(row: ClaimedRequest, reason: str, *, product_id: int | None, detail: str = ""):
    return DroppedRequest(
        product_id=product_id,
        endpoint=row.endpoint,
        reason=reason,
        detail=detail[:500],
        message_count=row.message_count,
        received_at=row.received_at,
    )


def _marker_drops(row: ClaimedRequest, product_id: int) -> list[DroppedRequest]:
    """The items the acceptance core left out of a row (drop markers), as drops of one message.
    (A row claimed without its messages has none.)"""
    if row.messages is None:
        return []
    return [
        DroppedRequest(
            product_id=product_id,
            endpoint=row.endpoint,
            reason=marker["reason"],
            detail=marker.get("detail", "")[:500],
            message_count=1,
            item_index=marker.get("index"),
            received_at=row.received_at,
        )
        for marker in row.messages
        if core.is_drop(marker)
    ]


_SEEN_CHUNK = 1000


def seen_messages_claim(*, product_id: int, message_ids: Sequence[str]) -> set[str]:
    """Record these messageIds as seen for the product; return the ones not seen before.

    Must run inside the transaction that applies the messages: an id is claimed only if that
    transaction commits. A concurrent transaction claiming the same id waits on the primary
    key and then finds it taken, so two workers never both apply one message. Ids are
    inserted in the order of their keys so two such transactions cannot deadlock.
    """
    claimed: set[str] = set()
    if not message_ids:
        return claimed
    table = connection.ops.quote_name(SeenMessage._meta.db_table)
    seen_at = connection.ops.adapt_datetimefield_value(timezone.now())
    key_field = SeenMessage._meta.pk
    by_key = {
        str(key_field.get_db_prep_value(seen_message_key(product_id, message_id), connection)): (
            message_id
        )
        for message_id in set(message_ids)
    }
    ordered = sorted(by_key)
    with connection.cursor() as cursor:
        for start in range(0, len(ordered), _SEEN_CHUNK):
            chunk = ordered[start : start + _SEEN_CHUNK]
            values = ", ".join(["(%s, %s, %s, %s)"] * len(chunk))
            params: list = []
            for key in chunk:
                params.extend((key, product_id, by_key[key], seen_at))
            cursor.execute(
                f"INSERT INTO {table} (message_key, product_id, message_id, seen_at) "  # noqa: S608
                f"VALUES {values} ON CONFLICT (message_key) DO NOTHING RETURNING message_key",
                params,
            )
            claimed.update(by_key[str(row[0])] for row in cursor.fetchall())
    return claimed


def _unseen_messages(product_id: int, rows: Sequence[ClaimedRequest]) -> list[Message]:
    """The rows' messages minus drop markers and repeats: a messageId seen earlier in these
    rows, or in an earlier drain (claimed in this transaction, see seen_messages_claim)."""
    candidates: list[dict] = []
    ids: set[str] = set()
    for row in rows:
        for message in row.messages:
            if core.is_drop(message):
                continue
            message_id = message.get("messageId")
            if message_id is not None:
                if message_id in ids:
                    continue
                ids.add(message_id)
            candidates.append(message)
    claimed = seen_messages_claim(product_id=product_id, message_ids=list(ids))
    return [
        _to_domain(message)
        for message in candidates
        if message.get("messageId") is None or message["messageId"] in claimed
    ]


# PostgreSQL: the claimed rows' messages, expanded from their stored JSON in the database, less
# drop markers: a track as its fields, any other message whole, each with its place in the rows
# (the order they were accepted in) and its SeenMessage key (seen_message_key, in SQL).
_STAGE_MESSAGES = """
    INSERT INTO eds_stage_message
        (kind, message_id, message_key, request_id, place, user_tid, group_tid, name, ms, body)
    SELECT kind, message_id, md5(%(product_prefix)s || message_id)::uuid, request_id, place,
           CASE WHEN kind = 'track' THEN body->>'userId' END,
           CASE WHEN kind = 'track' THEN body->>'groupId' END,
           CASE WHEN kind = 'track' THEN body->>'event' END,
           CASE WHEN kind = 'track' THEN (body->>'timestamp')::bigint END,
           CASE WHEN kind <> 'track' THEN body END
    FROM (
        SELECT m.body->>'type' AS kind, m.body->>'messageId' AS message_id, m.body,
               a.id AS request_id, m.place
        FROM ingestion_acceptedrequest a
        CROSS JOIN LATERAL jsonb_array_elements(a.messages) WITH ORDINALITY AS m(body, place)
        WHERE a.id BETWEEN %(first)s AND %(last)s AND a.id = ANY(%(ids)s::bigint[])
          AND m.body->>'type' <> %(drop)s) AS expanded"""
# Claim the staged messageIds, each at its first place (sorted by key, see seen_messages_claim:
# two workers cannot deadlock), and unstage every message that is not such a claimed first: a
# repeat within these rows, or an id an earlier drain already claimed. (Ranking the repeats
# with a window function instead sorted the messages whole, and cost more than the claim.)
_CLAIM_STAGED = """
    WITH firsts AS (
        SELECT DISTINCT ON (message_key) message_key, message_id, request_id, place
        FROM eds_stage_message WHERE message_key IS NOT NULL
        ORDER BY message_key, request_id, place),
    claimed AS (
        INSERT INTO ingestion_seenmessage (message_key, product_id, message_id, seen_at)
        SELECT message_key, %(product)s, message_id, %(now)s FROM firsts
        ON CONFLICT (message_key) DO NOTHING RETURNING message_key)
    DELETE FROM eds_stage_message s
    WHERE s.message_key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM firsts f JOIN claimed c ON c.message_key = f.message_key
        WHERE f.message_key = s.message_key AND f.request_id = s.request_id
          AND f.place = s.place)"""
_STAGED_TRACKS = """
    SELECT user_tid, group_tid, name, ms FROM eds_stage_message WHERE kind = 'track'"""


def _apply_in_database(product_id: int, rows: Sequence[ClaimedRequest]) -> None:
    """PostgreSQL: apply the rows with their messages left in the database. Tracks, nearly all
    of the traffic, go from the stored JSON to events and rollups in SQL; only identify and
    group messages, whose traits merge in Python, are loaded."""
    ids = [row.id for row in rows]
    params = {
        # The range lets PostgreSQL read the claimed rows through the primary key: a queue
        # table has dead rows between its live ones, and a scan filtering on the list alone
        # reads them all.
        "first": min(ids),
        "last": max(ids),
        "ids": _bigint_array(ids),
        "drop": core.DROP,
        "product": product_id,
        "product_prefix": f"{product_id}:",
        "now": timezone.now(),
    }
    with connection.cursor() as cursor:
        # Session-local; ON COMMIT DELETE ROWS and the TRUNCATE keep each call's rows its own.
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS eds_stage_message (kind text NOT NULL, "
            "message_id text, message_key uuid, request_id bigint, place bigint, user_tid text, "
            "group_tid text, name text, ms bigint, body jsonb) ON COMMIT DELETE ROWS"
        )
        cursor.execute("TRUNCATE eds_stage_message")
        cursor.execute(_STAGE_MESSAGES, params)
        cursor.execute(_CLAIM_STAGED, params)
        cursor.execute("SELECT body::text FROM eds_stage_message WHERE kind <> 'track'")
        others = [_to_domain(json.loads(body)) for (body,) in cursor.fetchall()]
    engagement_services.tracks_stage(select_sql=_STAGED_TRACKS)
    engagement_services.messages_apply(product_id=product_id, messages=others, staged_tracks=True)


def _apply_rows(product_id: int, rows: Sequence[ClaimedRequest]) -> list[DroppedRequest]:
    """Apply one product's rows together; if that fails, each half again, down to single rows,
    so one bad row is dropped with its reason instead of holding the whole backlog back (and
    finding it takes a few dozen tries in a batch of thousands, not one per row). The seen
    messageIds are written in the same transaction as the effect, so a failure never marks an
    id seen unapplied."""
    try:
        with transaction.atomic():
            if connection.vendor == "postgresql":
                _apply_in_database(product_id, rows)
            else:
                messages = _unseen_messages(product_id, rows)
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
    middle = len(rows) // 2
    return _apply_rows(product_id, rows[:middle]) + _apply_rows(product_id, rows[middle:])


@dataclass(frozen=True, slots=True)
class DrainResult:
    requests: int
    dropped: int
    # Whether this drain stopped at its limit, so more may be waiting.
    more: bool = False


_CLAIM_CHUNK = 100


@dataclass(frozen=True, slots=True)
class ClaimedRequest:
    """An accepted request locked by this drain: the stored row, without a model around it.

    `received` is the time it was accepted, or on PostgreSQL that time in Unix microseconds:
    only a drop or a revoked key needs it as a datetime, so most rows never convert it.
    `messages` is None on PostgreSQL for a row without drop markers: its messages are applied
    where they are stored (see _apply_in_database).
    """

    id: int
    received: datetime | int
    endpoint: str
    key_digest: str
    message_count: int
    messages: list | None

    @property
    def received_at(self) -> datetime:
        if isinstance(self.received, datetime):
            return self.received
        seconds, micros = divmod(self.received, 1_000_000)
        return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=micros)


_CLAIM_SQL = (
    "SELECT id, (EXTRACT(EPOCH FROM received_at) * 1000000)::bigint, endpoint, key_digest, "
    "jsonb_array_length(messages), CASE WHEN messages @> %s::jsonb THEN messages::text END "
    "FROM {table} ORDER BY id FOR UPDATE SKIP LOCKED LIMIT %s"
)
_HOLDS_DROP_MARKERS = json.dumps([{"type": core.DROP}])


def _claim(limit: int) -> tuple[list[ClaimedRequest], bool]:
    """Lock and load accepted requests in id order until they hold `limit` messages (at least
    one request) or `limit` requests; say whether the limit was reached.

    A Segment-SDK batch is one request of up to 2,500 messages, so counting requests alone could
    pull millions of messages into one transaction. Rows are read through a server-side cursor
    in chunks; on PostgreSQL a FOR UPDATE cursor locks only the rows it has fetched, so stopping
    early leaves the rest to other workers. There rows are read as plain tuples, and their
    messages stay in the database unless the row holds drop markers to record. (The json
    module, not orjson, decodes messages: orjson reads an integer beyond 64 bits, which traits
    may hold, as a float.)
    """
    if connection.vendor != "postgresql":
        query = AcceptedRequest.objects.select_for_update(skip_locked=True).order_by("id")[:limit]
        return _claim_until(
            (
                ClaimedRequest(
                    r.id, r.received_at, r.endpoint, r.key_digest, len(r.messages), r.messages
                )
                for r in query.iterator(chunk_size=_CLAIM_CHUNK)
            ),
            limit,
        )
    table = connection.ops.quote_name(AcceptedRequest._meta.db_table)
    with connection.chunked_cursor() as cursor:
        cursor.execute(_CLAIM_SQL.format(table=table), [_HOLDS_DROP_MARKERS, limit])

        def rows():
            while chunk := cursor.fetchmany(_CLAIM_CHUNK):
                for row_id, received, endpoint, key_digest, count, messages in chunk:
                    yield ClaimedRequest(
                        row_id,
                        received,
                        endpoint,
                        key_digest,
                        count,
                        None if messages is None else json.loads(messages),
                    )

        return _claim_until(rows(), limit)


def _claim_until(rows: Iterator[ClaimedRequest], limit: int) -> tuple[list[ClaimedRequest], bool]:
    claimed: list[ClaimedRequest] = []
    messages = 0
    for row in rows:
        claimed.append(row)
        messages += row.message_count
        if messages >= limit:
            return claimed, True
    return claimed, len(claimed) >= limit


def accepted_requests_drain(*, limit: int) -> DrainResult:
    """Claim accepted requests holding up to `limit` messages, apply them, and delete them, in
    one transaction.

    Claimed rows are locked (SKIP LOCKED on PostgreSQL), so any number of workers can drain at
    once; a worker that dies mid-way leaves its rows unclaimed for the next drain.
    """
    with transaction.atomic():
        _commit_without_waiting_for_disk()
        rows, more = _claim(limit)
        if not rows:
            return DrainResult(0, 0)
        keys = {
            key.digest: key
            for key in IngestionKey.objects.filter(digest__in={row.key_digest for row in rows})
        }
        drops: list[DroppedRequest] = []
        by_product: dict[int, list[ClaimedRequest]] = defaultdict(list)
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
                drops.extend(_marker_drops(row, key.product_id))
                by_product[key.product_id].append(row)
        for product_id, product_rows in by_product.items():
            drops.extend(_apply_rows(product_id, product_rows))
        if drops:
            DroppedRequest.objects.bulk_create(drops)
        _accepted_delete([row.id for row in rows])
    return DrainResult(len(rows), len(drops), more)


def _bigint_array(ids: Sequence[int]) -> str:
    """PostgreSQL's text form of an array of integers, for a `%s::bigint[]` parameter: one
    string to send instead of a list the driver formats element by element in Python."""
    return "{" + ",".join(map(str, ids)) + "}"


def _commit_without_waiting_for_disk() -> None:
    """On PostgreSQL, let this drain's commit return before its WAL reaches disk.

    Safe here, unlike at the front door: the drain applies and deletes its accepted rows in one
    transaction. If the database server crashes before that commit is on disk, the whole
    transaction is gone together: the rows are back in the store, their messageIds unclaimed,
    and the next drain applies them once. Readers may briefly have seen the lost effects. What
    it saves is a WAL flush per batch that the worker would otherwise sit out.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


def _accepted_delete(ids: list[int]) -> None:
    if connection.vendor != "postgresql":
        AcceptedRequest.objects.filter(id__in=ids).delete()
        return
    # One array parameter instead of a placeholder per id: nothing to prepare per row.
    table = connection.ops.quote_name(AcceptedRequest._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table} WHERE id BETWEEN %s AND %s AND id = ANY(%s::bigint[])",  # noqa: S608
            [min(ids), max(ids), _bigint_array(ids)],
        )


def accepted_requests_drain_for(*, seconds: float, batch: int) -> tuple[DrainResult, bool]:
    """Drain batches until the store is empty or `seconds` pass; say whether work is left."""
    deadline = time.monotonic() + seconds
    requests = dropped = 0
    while True:
        result = accepted_requests_drain(limit=batch)
        requests += result.requests
        dropped += result.dropped
        if not result.more:
            return DrainResult(requests, dropped), False
        if time.monotonic() >= deadline:
            return DrainResult(requests, dropped), True


def drops_purge(*, older_than_days: int) -> int:
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted, _ = DroppedRequest.objects.filter(dropped_at__lt=cutoff).delete()
    return deleted


def seen_messages_purge(*, older_than_days: int) -> int:
    """Forget messageIds seen longer ago than the dedup window (INGESTION_DEDUP_DAYS)."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted, _ = SeenMessage.objects.filter(seen_at__lt=cutoff).delete()
    return deleted
