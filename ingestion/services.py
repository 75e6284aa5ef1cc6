"""Ingestion writes: keys, draining the acceptance store into the domain, the record of drops."""

from __future__ import annotations

import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from django.db import OperationalError, connection, transaction
from django.utils import timezone

from engagement import services as engagement_services
from engagement.services import Message
from engagement.track_staging import StagedTracks, staged_tracks_start
from ingestion import acceptance, tally
from ingestion.models import (
    AcceptedRequest,
    DroppedRequest,
    IngestionKey,
    SeenMessage,
    key_fingerprint,
    seen_message_key,
)
from ingestion.pg_copy import copy_rows

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
        key_fingerprint=key_fingerprint(row.key_digest),
        reason=reason,
        detail=detail[:500],
        message_count=row.message_count,
        received_at=row.received_at,
    )


def _marker_drops(row: ClaimedRequest, product_id: int) -> list[DroppedRequest]:
    """The items the acceptance rules left out of a row (drop markers), as drops of one message.
    (A row claimed without its messages has none.)"""
    if row.messages is None:
        return []
    return [
        DroppedRequest(
            product_id=product_id,
            endpoint=row.endpoint,
            key_fingerprint=key_fingerprint(row.key_digest),
            reason=marker["reason"],
            detail=marker.get("detail", "")[:500],
            message_count=1,
            item_index=marker.get("index"),
            received_at=row.received_at,
        )
        for marker in row.messages
        if acceptance.is_drop(marker)
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


def _unseen_messages(product_id: int, messages: Iterable[dict]) -> list[Message]:
    """These stored messages minus drop markers and repeats: a messageId seen earlier among
    them, or in an earlier drain (claimed in this transaction, see seen_messages_claim)."""
    candidates: list[dict] = []
    ids: set[str] = set()
    for message in messages:
        if acceptance.is_drop(message):
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
        FROM {source}
        CROSS JOIN LATERAL jsonb_array_elements(a.messages) WITH ORDINALITY AS m(body, place)
        WHERE a.id BETWEEN %(first)s AND %(last)s AND {selection}
          AND m.body->>'type' <> %(drop)s) AS expanded"""
# Which accepted rows a drain applies (the range lets PostgreSQL read them through the primary
# key: a queue table has dead rows between its live ones, and a scan filtering on the rows alone
# reads them all): every claimed row under the given keys, or the requests listed, each a row
# or, in a row of several requests, the places of its messages there.
_ACCEPTED = "ingestion_acceptedrequest a"
_CLAIMED_UNDER_KEYS = (
    "a.id = ANY(ARRAY(SELECT c.id FROM eds_claim c WHERE c.key_digest = ANY(%(digests)s::text[])))"
)
_LISTED_SOURCE = (
    "ingestion_acceptedrequest a JOIN unnest(%(ids)s::bigint[], %(firsts)s::bigint[], "
    "%(lasts)s::bigint[]) AS listed(id, first_place, last_place) ON listed.id = a.id"
)
_LISTED = "m.place BETWEEN listed.first_place AND listed.last_place"
# Claim the staged messageIds, each at its first place (sorted by key, see seen_messages_claim:
# two workers cannot deadlock), keep the claimed keys, and count them against the staged
# messages that have a key. Equal counts (the common case) mean no repeat: nothing to unstage.
_CLAIM_STAGED = """
    WITH firsts AS (
        SELECT DISTINCT ON (message_key) message_key, message_id
        FROM eds_stage_message WHERE message_key IS NOT NULL
        ORDER BY message_key, request_id, place),
    claimed AS (
        INSERT INTO ingestion_seenmessage (message_key, product_id, message_id, seen_at)
        SELECT message_key, %(product)s, message_id, %(now)s FROM firsts
        ON CONFLICT (message_key) DO NOTHING RETURNING message_key),
    kept AS (INSERT INTO eds_claimed_key SELECT message_key FROM claimed)
    SELECT (SELECT count(*) FROM claimed),
           (SELECT count(*) FROM eds_stage_message WHERE message_key IS NOT NULL)"""
# Otherwise unstage every message that is not a claimed first: a repeat within these rows, or an
# id an earlier drain already claimed. (Ranking the repeats with a window function instead
# sorted the messages whole, and cost more than the claim.)
_UNSTAGE_REPEATS = """
    DELETE FROM eds_stage_message s
    WHERE s.message_key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM (SELECT DISTINCT ON (message_key) message_key, request_id, place
                       FROM eds_stage_message WHERE message_key IS NOT NULL
                       ORDER BY message_key, request_id, place) AS f
        JOIN eds_claimed_key c ON c.message_key = f.message_key
        WHERE f.message_key = s.message_key AND f.request_id = s.request_id
          AND f.place = s.place)"""
# The unique tracks, handed to engagement in its own staging table.
_STAGED_TRACKS = (
    f"{StagedTracks.INSERT_INTO} "  # noqa: S608 - fixed names
    "SELECT user_tid, group_tid, name, ms FROM eds_stage_message WHERE kind = 'track'"
)


def _apply_in_database(
    product_id: int, rows: Sequence[ClaimedRequest], claim: _Claim | None
) -> None:
    """PostgreSQL: apply the rows, or with `claim` every claimed row under its whole keys, with
    their messages left in the database. Tracks, nearly all of the traffic, go from the stored
    JSON to events and rollups in SQL; only identify and group messages, whose traits merge in
    Python, are loaded."""
    params = {
        "drop": acceptance.DROP,
        "product": product_id,
        "product_prefix": f"{product_id}:",
        "now": timezone.now(),
    }
    if claim is not None:
        source, selection = _ACCEPTED, _CLAIMED_UNDER_KEYS
        params.update(first=claim.first, last=claim.last, digests=list(claim.whole_keys))
    else:
        ids = [row.id for row in rows]
        source, selection = _LISTED_SOURCE, _LISTED
        params.update(
            first=min(ids),
            last=max(ids),
            ids=_bigint_array(ids),
            firsts=_bigint_array([row.places[0] for row in rows]),
            lasts=_bigint_array([row.places[1] for row in rows]),
        )
    with connection.cursor() as cursor:
        # Session-local; ON COMMIT DELETE ROWS and the TRUNCATE keep each call's rows its own.
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS eds_stage_message (kind text NOT NULL, "
            "message_id text, message_key uuid, request_id bigint, place bigint, user_tid text, "
            "group_tid text, name text, ms bigint, body jsonb) ON COMMIT DELETE ROWS"
        )
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS eds_claimed_key (message_key uuid NOT NULL) "
            "ON COMMIT DELETE ROWS"
        )
        cursor.execute("TRUNCATE eds_stage_message, eds_claimed_key")
        cursor.execute(_STAGE_MESSAGES.format(source=source, selection=selection), params)
        cursor.execute(_CLAIM_STAGED, params)
        claimed, keyed = cursor.fetchone()
        if claimed != keyed:
            cursor.execute(_UNSTAGE_REPEATS)
        cursor.execute("SELECT body::text FROM eds_stage_message WHERE kind <> 'track'")
        others = [_to_domain(json.loads(body)) for (body,) in cursor.fetchall()]
        staged_tracks = staged_tracks_start()
        cursor.execute(_STAGED_TRACKS)
    engagement_services.messages_apply(
        product_id=product_id, messages=others, staged_tracks=staged_tracks
    )


def _apply_rows(
    product_id: int,
    rows: Sequence[ClaimedRequest],
    claim: _Claim | None = None,
    tries: _Tries | None = None,
) -> list[DroppedRequest]:
    """Apply one product's rows (on PostgreSQL, with `claim`: every claimed row under the
    claim's whole keys) together; if that fails, each half again, down to single requests, so
    one bad request is found in a few dozen tries in a batch of thousands, not one per request;
    then that request's messages (see _apply_messages_of), so a bad message is dropped alone,
    not with the request it came in. The seen messageIds are written in the same transaction as
    the effect, so a failure never marks an id seen unapplied. `tries`: what the drain has left
    for searching requests for their bad messages."""
    try:
        with transaction.atomic():
            if connection.vendor == "postgresql":
                _apply_in_database(product_id, rows, claim)
            else:
                _apply_in_python(product_id, (m for row in rows for m in row.messages))
        return []
    except OperationalError:
        raise  # the database itself is in trouble: leave the rows for the next drain
    except Exception as error:
        if claim is not None:  # now one by one: load them
            rows = _claimed_rows(claim.whole_keys)
        tries = tries or _Tries()
        if len(rows) == 1:
            return _apply_messages_of(_Search(rows[0], product_id, tries), error)
    middle = len(rows) // 2
    return _apply_rows(product_id, rows[:middle], tries=tries) + _apply_rows(
        product_id, rows[middle:], tries=tries
    )


def _apply_in_python(product_id: int, messages: Iterable[dict]) -> None:
    """The generic route (SQLite's, and on PostgreSQL the one a failed request falls back to):
    the messages loaded into Python, less drop markers and repeats, applied in one call."""
    engagement_services.messages_apply(
        product_id=product_id, messages=_unseen_messages(product_id, messages)
    )


# Tries (savepoints) one drain may spend searching requests that failed whole for their bad
# messages. One bad message among 2,500 takes about 24 tries, a few tenths of a second; each
# further one about 2 x log2(messages / bad ones). Without a bound, a bug that fails every
# message would cost two tries a message (about 13 s for one full Segment batch on PostgreSQL,
# minutes for a drain of them) with the drain's transaction open; past it, a part that fails is
# dropped whole, as a request was before the search went down to messages.
_DRAIN_MESSAGE_TRIES = 500


@dataclass(slots=True)
class _Tries:
    """What a drain has left of _DRAIN_MESSAGE_TRIES."""

    left: int = field(default_factory=lambda: _DRAIN_MESSAGE_TRIES)


@dataclass(frozen=True, slots=True)
class _Search:
    """The search of one request that failed whole for its bad messages."""

    request: ClaimedRequest
    product_id: int
    tries: _Tries


def _apply_messages_of(search: _Search, error: Exception) -> list[DroppedRequest]:
    """A request that failed whole (with `error`): apply its messages through the generic route,
    in halves, down to single messages (each try in a savepoint), so a message that cannot be
    applied is dropped alone and the others are applied, in order. The failed try was the
    generic route on SQLite, so the search starts at the halves there; on PostgreSQL it was the
    SQL route, and the whole request is tried once more the generic way."""
    request = search.request
    messages = request.messages if request.messages is not None else _stored_messages(request)
    # Each message with its place in the request (a batch's item index): drop markers keep
    # theirs, so the indexes are the sender's.
    items = [(index, m) for index, m in enumerate(messages) if not acceptance.is_drop(m)]
    logger.warning(
        "accepted request %s cannot be applied whole; applying its %s messages in parts",
        request.id,
        len(items),
        exc_info=error,
    )
    return _apply_items(search, items, error if connection.vendor != "postgresql" else None)


def _apply_items(
    search: _Search, items: list[tuple[int, dict]], error: Exception | None
) -> list[DroppedRequest]:
    """Apply these messages of a request together, or with `error` (they just failed together)
    in halves; a single message that fails is dropped. Once the drain is out of tries, a part
    that fails is dropped whole (the parts not tried yet still get their one try each)."""
    if not items:
        return []
    if error is None:
        search.tries.left -= 1
        try:
            with transaction.atomic():
                _apply_in_python(search.product_id, [message for _, message in items])
            return []
        except OperationalError:
            raise  # the database itself is in trouble: leave the rows for the next drain
        except Exception as failure:
            error = failure
    if len(items) == 1 or search.tries.left <= 0:
        return [_items_drop(search, items, error)]
    middle = len(items) // 2
    return _apply_items(search, items[:middle], None) + _apply_items(search, items[middle:], None)


def _stored_messages(request: ClaimedRequest) -> list:
    """PostgreSQL: a claimed request's messages, read from its row (see ClaimedRequest)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT messages::text FROM ingestion_acceptedrequest WHERE id = %s", [request.id]
        )
        (text,) = cursor.fetchone()
    first, last = request.places
    return json.loads(text)[first - 1 : last]  # json, not orjson: see _claimed_rows


def _items_drop(search: _Search, items: list[tuple[int, dict]], error: Exception) -> DroppedRequest:
    """The drop of messages of a request that cannot be applied: one (its place in the request
    as `item_index`), or a part the search ran out of tries in (`item_index` its first). The
    request's endpoint and time; the detail names types, never a value from the messages."""
    request, first, last = search.request, items[0][0], items[-1][0]
    logger.error(
        "dropping %s of accepted request %s: it cannot be applied",
        f"item {first}" if len(items) == 1 else f"{len(items)} items from {first} to {last}",
        request.id,
        exc_info=error,
    )
    if len(items) == 1:
        kind = items[0][1].get("type")
        what = f"Item {first} ({kind[:20] if isinstance(kind, str) else 'message'})"
        outcome = "it was dropped alone, not with its request"
    else:
        what = f"Items {first} to {last} ({len(items)} messages)"
        outcome = (
            "the search for the bad ones among them ran out of tries; the request's other "
            "messages were applied"
        )
    return DroppedRequest(
        product_id=search.product_id,
        endpoint=request.endpoint,
        key_fingerprint=key_fingerprint(request.key_digest),
        reason=DroppedRequest.Reason.APPLY_FAILED,
        detail=(
            f"{what} of the request could not be applied ({type(error).__name__}); {outcome}. "
            "See the worker log."
        )[:500],
        message_count=len(items),
        item_index=first,
        received_at=request.received_at,
    )


@dataclass(frozen=True, slots=True)
class DrainResult:
    requests: int
    dropped: int
    # Whether this drain stopped at its limit, so more may be waiting.
    more: bool = False


_LAST_PLACE = 2**31 - 1  # "to the end": no row holds more messages


@dataclass(frozen=True, slots=True)
class ClaimedRequest:
    """An accepted request locked by this drain, without a model around it: a stored row, or
    one request of a row that holds several (see AcceptedRequest).

    `received` is the time it was accepted, or on PostgreSQL that time in Unix microseconds:
    only a drop or a revoked key needs it as a datetime, so most rows never convert it.
    `messages` is None on PostgreSQL for a row without drop markers: its messages are applied
    where they are stored (see _apply_in_database). `places`: where its messages are among the
    row's, the first and the last, counted from 1.
    """

    id: int
    received: datetime | int
    endpoint: str
    key_digest: str
    message_count: int
    messages: list | None
    places: tuple[int, int] = (1, _LAST_PLACE)

    @property
    def received_at(self) -> datetime:
        if isinstance(self.received, datetime):
            return self.received
        seconds, micros = divmod(self.received, 1_000_000)
        return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=micros)


def _requests_of(row: ClaimedRequest, parts: list | None) -> list[ClaimedRequest]:
    """The requests a row holds: itself, or for a row of several (`parts`: [endpoint, received
    in Unix microseconds, message count] each) one each, with its messages' places."""
    if not parts:
        return [row]
    requests = []
    first = 1
    for endpoint, received, count in parts:
        last = first + count - 1
        messages = None if row.messages is None else row.messages[first - 1 : last]
        requests.append(
            replace(
                row,
                received=received,
                endpoint=endpoint,
                message_count=count,
                messages=messages,
                places=(first, last),
            )
        )
        first = last + 1
    return requests


@dataclass(frozen=True, slots=True)
class _Claim:
    """What a drain locked. On PostgreSQL the rows stay in the session's eds_claim table, and
    `keys` holds, per ingestion key digest, the latest time a row under it was accepted and
    whether any of those rows holds drop markers: a key valid for all its rows has them applied
    without a Python object per row. Elsewhere every row is in `rows`.
    `whole_keys` names the keys whose rows one apply takes (see _apply_rows)."""

    requests: int  # requests, not rows: a row may hold several
    more: bool
    first: int = 0
    last: int = 0
    keys: dict[str, tuple[datetime, bool]] = field(default_factory=dict)
    rows: list[ClaimedRequest] = field(default_factory=list)
    whole_keys: tuple[str, ...] = ()


# The first claim statement of a drain asks for this many rows; the next ones ask for as many
# as the messages still wanted need at the rows' average size so far. Few rows first: a
# Segment-SDK batch is one request of up to 2,500 messages, and every row locked beyond the
# drain's limit waits, unapplied, for its commit.
_CLAIM_FIRST_ROWS = 10
_CLAIM_ROWS = """
    WITH claimed AS (
        INSERT INTO eds_claim
            (id, received_at, endpoint, key_digest, message_count, has_drops, request_count)
        SELECT id, received_at, endpoint, key_digest, jsonb_array_length(messages),
               messages @> %(markers)s::jsonb, request_count
        FROM ingestion_acceptedrequest WHERE id > %(after)s
        ORDER BY id LIMIT %(rows)s FOR UPDATE SKIP LOCKED
        RETURNING id, message_count, request_count)
    SELECT count(*), COALESCE(sum(message_count), 0), min(id), max(id),
           COALESCE(sum(request_count), 0)
    FROM claimed"""
# Keep the rows up to the first one that brings the messages to the limit.
_CLAIM_TRIM = """
    DELETE FROM eds_claim WHERE id > (
        SELECT min(id) FROM (SELECT id, sum(message_count) OVER (ORDER BY id) AS running
                             FROM eds_claim) AS r
        WHERE running >= %(limit)s)"""
_CLAIMED_ROWS = """
    SELECT c.id, (EXTRACT(EPOCH FROM c.received_at) * 1000000)::bigint, c.endpoint,
           c.key_digest, c.message_count,
           CASE WHEN c.has_drops THEN (
               SELECT a.messages::text FROM ingestion_acceptedrequest a WHERE a.id = c.id) END,
           CASE WHEN c.request_count > 1 THEN (
               SELECT a.requests::text FROM ingestion_acceptedrequest a WHERE a.id = c.id) END
    FROM eds_claim c WHERE c.key_digest = ANY(%(digests)s::text[]) {only_with_drops}
    ORDER BY c.id"""
_HOLDS_DROP_MARKERS = json.dumps([{"type": acceptance.DROP}])
_CLAIM_CHUNK = 100


def _claim(limit: int) -> _Claim:
    """Lock accepted requests in id order until they hold `limit` messages (at least one
    request) or `limit` requests; say whether the limit was reached.

    Counting requests alone could pull millions of messages into one transaction: a
    Segment-SDK batch is one request of up to 2,500 messages. Locks are SKIP LOCKED, so any
    number of workers drain at once.
    """
    if connection.vendor == "postgresql":
        return _claim_in_database(limit)
    query = AcceptedRequest.objects.select_for_update(skip_locked=True).order_by("id")[:limit]
    rows: list[ClaimedRequest] = []
    messages = stored_rows = 0
    for r in query.iterator(chunk_size=_CLAIM_CHUNK):
        count = len(r.messages)
        row = ClaimedRequest(r.id, r.received_at, r.endpoint, r.key_digest, count, r.messages)
        rows.extend(_requests_of(row, r.requests))
        stored_rows += 1
        messages += count
        if messages >= limit:
            break
    return _Claim(len(rows), messages >= limit or stored_rows >= limit, rows=rows)


def _claim_in_database(limit: int) -> _Claim:
    """PostgreSQL: lock the rows into the session's eds_claim table, a few statements per
    drain, and bring back one line per ingestion key rather than a line per row. Messages stay
    where they are stored."""
    with connection.cursor() as cursor:
        # Session-local; ON COMMIT DELETE ROWS and the TRUNCATE keep each call's rows its own.
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS eds_claim (id bigint NOT NULL, "
            "received_at timestamptz NOT NULL, endpoint text NOT NULL, key_digest text NOT NULL, "
            "message_count integer NOT NULL, has_drops boolean NOT NULL, "
            "request_count integer NOT NULL) ON COMMIT DELETE ROWS"
        )
        cursor.execute("TRUNCATE eds_claim")
        rows = messages = first = last = requests = 0
        asked = min(_CLAIM_FIRST_ROWS, limit)
        while True:
            cursor.execute(
                _CLAIM_ROWS, {"markers": _HOLDS_DROP_MARKERS, "after": last, "rows": asked}
            )
            count, count_messages, lowest, highest, count_requests = cursor.fetchone()
            if count:
                rows += count
                messages += count_messages
                requests += count_requests
                first = first or lowest
                last = highest
            if count < asked or messages >= limit or rows >= limit:
                break
            per_row = max(messages, 1) / rows
            asked = max(1, min(limit - rows, math.ceil((limit - messages) / per_row)))
        if not rows:
            return _Claim(0, False)
        more = messages >= limit or rows >= limit
        if messages > limit and rows > 1:
            # Rows past the limit stay locked, unapplied, until this drain commits.
            cursor.execute(_CLAIM_TRIM, {"limit": limit})
            cursor.execute("SELECT max(id), sum(request_count) FROM eds_claim")
            last, requests = cursor.fetchone()
        cursor.execute(
            "SELECT key_digest, max(received_at), bool_or(has_drops) FROM eds_claim "
            "GROUP BY key_digest"
        )
        keys = {digest: (latest, has_drops) for digest, latest, has_drops in cursor.fetchall()}
    return _Claim(requests, more, first, last, keys=keys)


def _claimed_rows(digests: Sequence[str], *, only_with_drops: bool = False) -> list[ClaimedRequest]:
    """PostgreSQL: the requests of the claimed rows under these keys, in the order they were
    accepted, with their messages if they hold drop markers. (The json module, not orjson,
    decodes them: orjson reads an integer beyond 64 bits, which traits may hold, as a float.)"""
    query = _CLAIMED_ROWS.format(only_with_drops="AND c.has_drops" if only_with_drops else "")
    with connection.cursor() as cursor:
        cursor.execute(query, {"digests": list(digests)})
        found = cursor.fetchall()
    requests: list[ClaimedRequest] = []
    for row_id, received, endpoint, key_digest, count, messages, parts in found:
        row = ClaimedRequest(
            row_id,
            received,
            endpoint,
            key_digest,
            count,
            None if messages is None else json.loads(messages),
        )
        requests.extend(_requests_of(row, None if parts is None else json.loads(parts)))
    return requests


def accepted_requests_drain(*, limit: int) -> DrainResult:
    """Claim accepted requests holding up to `limit` messages, apply them, and delete them, in
    one transaction.

    Claimed rows are locked (SKIP LOCKED on PostgreSQL), so any number of workers can drain at
    once; a worker that dies mid-way leaves its rows unclaimed for the next drain.
    """
    with transaction.atomic():
        _commit_without_waiting_for_disk()
        claim = _claim(limit)
        if not claim.requests:
            return DrainResult(0, 0)
        drops, work = _sort_claimed(claim)
        tries = _Tries()
        for product_id, (rows, whole_keys) in sorted(work.items()):
            if whole_keys:
                whole = replace(claim, whole_keys=whole_keys)
                drops.extend(_apply_rows(product_id, [], whole, tries))
            else:
                drops.extend(_apply_rows(product_id, rows, tries=tries))
        if drops:
            _drops_record(drops)
        _accepted_tally(claim)
        _accepted_delete(claim)
    return DrainResult(claim.requests, len(drops), claim.more)


def _sort_claimed(
    claim: _Claim,
) -> tuple[list[DroppedRequest], dict[int, tuple[list[ClaimedRequest], tuple[str, ...]]]]:
    """The claim's drops (unknown or revoked keys, items the acceptance rules left out), and per
    product what to apply: its rows, or the keys all of whose claimed rows it takes."""
    keys = {
        key.digest: key
        for key in IngestionKey.objects.filter(
            digest__in=set(claim.keys) | {row.key_digest for row in claim.rows}
        )
    }
    drops: list[DroppedRequest] = []
    whole_keys: dict[int, list[str]] = defaultdict(list)
    one_by_one: list[str] = []  # keys some or all of whose rows are dropped
    with_markers: list[str] = []
    for digest, (latest, has_drops) in claim.keys.items():
        key = keys.get(digest)
        if key is None or (key.revoked_at is not None and key.revoked_at <= latest):
            one_by_one.append(digest)
            continue
        whole_keys[key.product_id].append(digest)
        if has_drops:
            with_markers.append(digest)
    if with_markers:
        for row in _claimed_rows(with_markers, only_with_drops=True):
            drops.extend(_marker_drops(row, keys[row.key_digest].product_id))
    rows = list(claim.rows) + (_claimed_rows(one_by_one) if one_by_one else [])
    by_product: dict[int, list[ClaimedRequest]] = defaultdict(list)
    for row in rows:
        key = keys.get(row.key_digest)
        drop = _key_drop(row, key)
        if drop is not None:
            drops.append(drop)
        else:
            drops.extend(_marker_drops(row, key.product_id))
            by_product[key.product_id].append(row)
    work: dict[int, tuple[list[ClaimedRequest], tuple[str, ...]]] = {}
    for product_id in by_product.keys() | whole_keys.keys():
        product_rows, product_keys = by_product.get(product_id, []), whole_keys.get(product_id, [])
        if product_rows and product_keys:
            # Both for one product (a key revoked within this claim, another valid): row by row.
            product_rows = sorted(product_rows + _claimed_rows(product_keys), key=_row_id)
            product_keys = []
        work[product_id] = (product_rows, tuple(product_keys))
    return drops, work


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


def _drops_record(drops: list[DroppedRequest]) -> None:
    """Store the drops of a drain. On PostgreSQL in one COPY: a sender whose key was revoked
    can send as fast as anyone, and the ORM's bulk_create cost about 60 µs a drop."""
    if connection.vendor != "postgresql":
        DroppedRequest.objects.bulk_create(drops)
        return
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


def _key_drop(row: ClaimedRequest, key: IngestionKey | None) -> DroppedRequest | None:
    """The drop of a row whose key no product has, or was revoked by the time it came."""
    if key is None:
        return _drop(
            row,
            DroppedRequest.Reason.UNKNOWN_KEY,
            product_id=None,
            detail="No product has this ingestion key.",
        )
    if key.revoked_at is not None and key.revoked_at <= row.received_at:
        return _drop(
            row,
            DroppedRequest.Reason.REVOKED_KEY,
            product_id=key.product_id,
            detail=f"Key {key.key[:6]}… was revoked at {key.revoked_at}.",
        )
    return None


def _row_id(row: ClaimedRequest) -> tuple[int, int]:
    """Where a request's messages are in the store: the order they were accepted in."""
    return row.id, row.places[0]


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


def _accepted_tally(claim: _Claim) -> None:
    """Count the claim's requests per key and minute (what the dashboard's health page shows)."""
    if connection.vendor == "postgresql":
        tally.accepted_minutes_record_claimed()
    else:
        tally.accepted_minutes_record((row.key_digest, row.received_at) for row in claim.rows)


def _accepted_delete(claim: _Claim) -> None:
    if connection.vendor != "postgresql":
        AcceptedRequest.objects.filter(id__in=[row.id for row in claim.rows]).delete()
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM ingestion_acceptedrequest WHERE id BETWEEN %s AND %s "
            "AND id = ANY(ARRAY(SELECT id FROM eds_claim))",
            [claim.first, claim.last],
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
