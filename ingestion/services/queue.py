"""The durable queue of accepted requests as a drain sees it: claiming (locking) rows, reading the
requests they hold, and deleting them once applied.

Claimed rows are locked with SKIP LOCKED, so any number of workers drain at once; a worker that
dies mid-way leaves its rows unclaimed for the next drain. On PostgreSQL a drain then waits for
the drains holding earlier rows of its products that link users (_AFTER_EARLIER_DRAINS), so a
track counts for the account a call accepted before it linked, whichever worker claimed each.
How is the ingestion backend's choice (ingestion/backends): on PostgreSQL the claimed rows are
listed in a session table (the batch's `claim`) and their messages stay where they are stored,
so a drain brings back a line per ingestion key rather than a Python object per row; elsewhere
the rows are loaded.
"""

# SQL names its session tables (ingestion/session_tables.py, fixed names); every value is a
# query parameter.
# ruff: noqa: S608

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import NamedTuple

from django.db import connection

from ingestion import acceptance
from ingestion.backends import ingestion_backend
from ingestion.models import AcceptedRequest
from ingestion.session_tables import CLAIM, SessionTable

_LAST_PLACE = 2**31 - 1  # "to the end": no row holds more messages


@dataclass(frozen=True, slots=True)
class ClaimedRequest:
    """An accepted request locked by this drain, without a model around it: a stored row, or
    one request of a row that holds several (see AcceptedRequest).

    `received` is the time it was accepted, or on PostgreSQL that time in Unix microseconds:
    only a drop or a revoked key needs it as a datetime, so most rows never convert it.
    `messages` is None on PostgreSQL for a row without drop markers: its messages are applied
    where they are stored (see staging). `places`: where its messages are among the
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
    def loaded_messages(self) -> list:
        """Its messages, on a route that loads them (the generic one): never None there."""
        if self.messages is None:
            raise ValueError(f"accepted request {self.id}: its messages were not loaded")
        return self.messages

    @property
    def received_at(self) -> datetime:
        if isinstance(self.received, datetime):
            return self.received
        seconds, micros = divmod(self.received, 1_000_000)
        return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=micros)

    @property
    def accepted_order(self) -> tuple[int, int]:
        """A sort key putting requests in the order they were accepted: row, then place in it."""
        return self.id, self.places[0]


class ClaimedKey(NamedTuple):
    """What a claim holds under one ingestion key."""

    latest_received_at: datetime  # a key revoked after this was valid for every row
    has_drop_markers: bool  # some row holds items the acceptance rules left out


class ClaimedBatch:
    """What a drain locked, as the drain reads it on every database: how many requests and
    messages, whether the claim stopped at its limit, what it holds per ingestion key digest
    (`keys`), and the requests under some keys (`requests_under`) or those rows whole
    (`under_keys`, for the backend to apply). Each backend's claim is one of the two types
    below, filled whole."""

    __slots__ = ()
    request_count: int  # requests, not rows: a row may hold several
    more: bool  # the claim stopped at its limit, so more may be waiting
    message_count: int
    keys: dict[str, ClaimedKey]

    def requests_under(
        self, digests: Sequence[str], *, only_with_drop_markers: bool = False
    ) -> list[ClaimedRequest]:
        """The requests of the claimed rows under these keys, in the order they were accepted."""
        raise NotImplementedError

    def under_keys(self, digests: Sequence[str]) -> ClaimedUnderKeys:
        return ClaimedUnderKeys(self, tuple(digests))


@dataclass(frozen=True, slots=True)
class ClaimedUnderKeys:
    """Every row a claim holds under these ingestion keys, to be applied together."""

    batch: ClaimedBatch
    digests: tuple[str, ...]

    def requests(self) -> list[ClaimedRequest]:
        return self.batch.requests_under(self.digests)


@dataclass(frozen=True, slots=True)
class SessionClaim(ClaimedBatch):
    """PostgreSQL's claim: the rows stay where they are stored and are listed, with where
    that is, in the session table `claim`; `first` is the lowest id among them. A key valid for
    all its rows has them applied without a Python object per row."""

    request_count: int
    more: bool
    message_count: int
    keys: dict[str, ClaimedKey]
    claim: SessionTable
    first: int

    def requests_under(
        self, digests: Sequence[str], *, only_with_drop_markers: bool = False
    ) -> list[ClaimedRequest]:
        return claimed_requests(self, digests, only_with_drop_markers=only_with_drop_markers)


@dataclass(frozen=True, slots=True)
class LoadedClaim(ClaimedBatch):
    """The portable claim (SQLite): every claimed request loaded, with its messages, in the
    order they were accepted."""

    request_count: int
    more: bool
    message_count: int
    keys: dict[str, ClaimedKey]
    requests: list[ClaimedRequest]

    def requests_under(
        self, digests: Sequence[str], *, only_with_drop_markers: bool = False
    ) -> list[ClaimedRequest]:
        wanted = set(digests)
        return [
            request
            for request in self.requests
            if request.key_digest in wanted
            and (not only_with_drop_markers or _holds_drop_markers(request))
        ]


def _holds_drop_markers(request: ClaimedRequest) -> bool:
    return any(acceptance.is_drop(message) for message in request.messages or ())


_CLAIM_CHUNK = 100


def requests_claim(*, limit: int) -> ClaimedBatch:
    """Lock accepted requests in id order until they hold `limit` messages (at least one
    request) or `limit` requests; say whether the limit was reached.

    Counting requests alone could pull millions of messages into one transaction: a
    Segment-SDK batch is one request of up to 2,500 messages.
    """
    return ingestion_backend().requests_claim(limit)


def claim_loaded(limit: int) -> LoadedClaim:
    """The portable claim: the rows and their messages loaded, every request in `requests`."""
    query = AcceptedRequest.objects.select_for_update(skip_locked=True).order_by("id")[:limit]
    requests: list[ClaimedRequest] = []
    messages = stored_rows = 0
    for r in query.iterator(chunk_size=_CLAIM_CHUNK):
        count = len(r.messages)
        row = ClaimedRequest(r.id, r.received_at, r.endpoint, r.key_digest, count, r.messages)
        requests.extend(_requests_of(row, r.requests))
        stored_rows += 1
        messages += count
        if messages >= limit:
            break
    keys: dict[str, ClaimedKey] = {}
    for request in requests:
        known = keys.get(request.key_digest)
        latest = request.received_at
        markers = _holds_drop_markers(request)
        if known is not None:
            latest = max(latest, known.latest_received_at)
            markers = markers or known.has_drop_markers
        keys[request.key_digest] = ClaimedKey(latest, markers)
    return LoadedClaim(
        len(requests), messages >= limit or stored_rows >= limit, messages, keys, requests
    )


# The first claim statement of a drain asks for _CLAIM_FIRST_ROWS rows; the next ones ask for as
# many as the messages still wanted need at the rows' average size so far. Few rows first: a
# Segment-SDK batch is one request of up to 2,500 messages, and every row locked beyond the
# drain's limit waits, unapplied, for its commit. A trim then keeps the rows up to the first one
# that brings the messages to the limit.
_CLAIM_FIRST_ROWS = 10
_CLAIM_ROWS = """
    WITH claimed AS (
        INSERT INTO {claim}
            (id, tid, received_at, endpoint, key_digest, message_count, has_drops, request_count)
        SELECT id, ctid, received_at, endpoint, key_digest, jsonb_array_length(messages),
               messages @> %(markers)s::jsonb, request_count
        FROM ingestion_acceptedrequest WHERE id > %(after)s
        ORDER BY id LIMIT %(rows)s FOR UPDATE SKIP LOCKED
        RETURNING id, message_count, request_count)
    SELECT count(*), COALESCE(sum(message_count), 0), min(id), max(id),
           COALESCE(sum(request_count), 0)
    FROM claimed"""
_CLAIM_TRIM = """
    DELETE FROM {claim} WHERE id > (
        SELECT min(id) FROM (SELECT id, sum(message_count) OVER (ORDER BY id) AS running
                             FROM {claim}) AS r
        WHERE running >= %(limit)s)"""
_HOLDS_DROP_MARKERS = json.dumps([{"type": acceptance.DROP}])
# Rows accepted before the claimed ones, under any key of the claimed keys' products, still there
# and holding a call that links users: a group call, an identify naming a groupId, or an alias.
# Such a row is held by another drain that has not committed (its claim skipped it); locking it
# waits for that drain to end, so a track sent after the call linking its user counts for that
# account whichever worker claimed it (an event's account is decided when it is stored), also
# when the two came with different keys (a browser's and a server's). Other calls give the same
# users, accounts, traits and links in any order (engagement.services.messages_apply), so rows
# of tracks and plain identifies are not waited for: two workers drain them side by side. A
# drain waits only on drains holding lower ids, so two never wait on each other. (A row left
# unclaimed, or by a drain that rolled back, is locked and left for the next drain.)
_LINKS_USERS = (
    """messages @> '[{"type": "group"}]' OR messages @> '[{"type": "alias"}]' """
    """OR jsonb_path_exists(messages, '$[*] ? (@.type == "identify" && exists(@.groupId))')"""
)
_AFTER_EARLIER_DRAINS = f"""
    SELECT count(*) FROM (
        SELECT 1 FROM ingestion_acceptedrequest
        WHERE id < %(first)s AND key_digest = ANY(ARRAY(
            SELECT product_key.digest FROM ingestion_ingestionkey claimed_key
            JOIN ingestion_ingestionkey product_key
                ON product_key.product_id = claimed_key.product_id
            WHERE claimed_key.digest = ANY(%(digests)s::text[])))
        AND ({_LINKS_USERS})
        FOR UPDATE) AS earlier"""


def claim_in_session_table(limit: int) -> SessionClaim:
    """PostgreSQL: lock the rows into the session table CLAIM, a few statements per drain, and
    bring back one line per ingestion key rather than a line per row."""
    claim = CLAIM.start()
    with connection.cursor() as cursor:
        rows = messages = first = last = requests = 0
        asked = min(_CLAIM_FIRST_ROWS, limit)
        while True:
            cursor.execute(
                _CLAIM_ROWS.format(claim=claim),
                {"markers": _HOLDS_DROP_MARKERS, "after": last, "rows": asked},
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
            return SessionClaim(0, False, 0, {}, claim, 0)
        more = messages >= limit or rows >= limit
        if messages > limit and rows > 1:
            # Rows past the limit stay locked, unapplied, until this drain commits.
            cursor.execute(_CLAIM_TRIM.format(claim=claim), {"limit": limit})
            cursor.execute(f"SELECT sum(request_count), sum(message_count) FROM {claim}")
            requests, messages = cursor.fetchone()
        cursor.execute(
            f"SELECT key_digest, max(received_at), bool_or(has_drops) FROM {claim} "
            "GROUP BY key_digest"
        )
        keys = {
            digest: ClaimedKey(latest, markers) for digest, latest, markers in cursor.fetchall()
        }
    return SessionClaim(requests, more, messages, keys, claim, first)


def earlier_drains_wait_in_session(batch: SessionClaim) -> None:
    """PostgreSQL: wait for the drains holding rows accepted before this claim's that link
    users (_AFTER_EARLIER_DRAINS). Called once a claim's messages are staged and their
    messageIds claimed, right before anything is applied: a drain's staging overlaps the apply
    of the drain before it."""
    with connection.cursor() as cursor:
        cursor.execute(_AFTER_EARLIER_DRAINS, {"first": batch.first, "digests": list(batch.keys)})


_CLAIMED_REQUESTS = """
    SELECT c.id, (EXTRACT(EPOCH FROM c.received_at) * 1000000)::bigint, c.endpoint,
           c.key_digest, c.message_count,
           CASE WHEN c.has_drops THEN (
               SELECT a.messages::text FROM ingestion_acceptedrequest a WHERE a.ctid = c.tid) END,
           CASE WHEN c.request_count > 1 THEN (
               SELECT a.requests::text FROM ingestion_acceptedrequest a WHERE a.ctid = c.tid) END
    FROM {claim} c WHERE c.key_digest = ANY(%(digests)s::text[]) {only_with_drop_markers}
    ORDER BY c.id"""


def claimed_requests(
    batch: SessionClaim, digests: Sequence[str], *, only_with_drop_markers: bool = False
) -> list[ClaimedRequest]:
    """PostgreSQL: the requests of the claimed rows under these keys, in the order they were
    accepted, with their messages if they hold drop markers. (The json module, not orjson,
    decodes them: orjson reads an integer beyond 64 bits, which traits may hold, as a float.)"""
    query = _CLAIMED_REQUESTS.format(
        claim=batch.claim,
        only_with_drop_markers="AND c.has_drops" if only_with_drop_markers else "",
    )
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


def stored_messages(request: ClaimedRequest) -> list:
    """A claimed request's messages, from its row when the claim did not load them."""
    if request.messages is not None:
        return request.messages
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT messages::text FROM ingestion_acceptedrequest WHERE id = %s", [request.id]
        )
        (text,) = cursor.fetchone()
    first, last = request.places
    return json.loads(text)[first - 1 : last]  # json, not orjson: see claimed_requests


def claimed_delete(batch: ClaimedBatch) -> None:
    """Delete the claimed rows (in the drain's transaction, once they are applied)."""
    ingestion_backend().claimed_delete(batch)


def claimed_delete_loaded(batch: LoadedClaim) -> None:
    AcceptedRequest.objects.filter(id__in=[r.id for r in batch.requests]).delete()


def claimed_delete_in_session_table(batch: SessionClaim) -> None:
    # By where the rows are stored: a look-up in the primary key per row cost twice as much.
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM ingestion_acceptedrequest "
            f"WHERE ctid = ANY(ARRAY(SELECT tid FROM {batch.claim}))"
        )
