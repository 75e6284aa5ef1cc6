"""What each ingestion endpoint takes, and `accept`: a request's body and key to what the store
keeps and how to answer, or a `RequestError`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ingestion.acceptance import messages
from ingestion.acceptance.body import InexactReading, Reading, parse_json_object, read_body
from ingestion.acceptance.errors import FieldErrors, RequestError
from ingestion.acceptance.fields import Clock
from ingestion.acceptance.keys import (
    digest_from_basic_header,
    digest_key,
    key_from_body,
    segment_key_digest,
)

MAX_BATCH_ITEMS = 2500
DEFAULT_CLOCK_SKEW_MS = 5000

# What an endpoint takes: one v1/v2 call, one Segment-spec message, or a Segment-SDK batch.
CALL, SEGMENT, BATCH = "call", "segment", "batch"


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    takes: str
    names: Mapping[str, str]  # of the id fields
    rule: messages.CallRule | None = None  # for a call
    key_in_body: bool = False
    # Segment's HTTP tracking API: the path names the message's type (/v1/track, /v1/t).
    message_type: str | None = None


V1, V2 = messages.V1_NAMES, messages.V2_NAMES
ENDPOINTS: dict[str, Endpoint] = {
    "v2/identify": Endpoint("v2/identify", CALL, V2, messages.identify),
    "v2/group": Endpoint("v2/group", CALL, V2, messages.group),
    "v2/track": Endpoint("v2/track", CALL, V2, messages.track),
    "v1/users": Endpoint("v1/users", CALL, V1, messages.identify, key_in_body=True),
    "v1/groups": Endpoint("v1/groups", CALL, V1, messages.group, key_in_body=True),
    "v1/events": Endpoint("v1/events", CALL, V1, messages.track, key_in_body=True),
    # Segment-family clients: the key comes as Basic (either form) or as `writeKey` in the body.
    "segment": Endpoint("segment", SEGMENT, V2),
    "v1/batch": Endpoint("v1/batch", BATCH, V2),
    "v1/import": Endpoint("v1/import", BATCH, V2),
}
# Segment's HTTP tracking API, each path and analytics.js's short form of it (/v1/t, ...).
SEGMENT_PATH_TYPES = {
    "identify": "i",
    "track": "t",
    "page": "p",
    "screen": "s",
    "group": "g",
    "alias": "a",
}
for _type, _short in SEGMENT_PATH_TYPES.items():
    for _name in (f"v1/{_type}", f"v1/{_short}"):
        ENDPOINTS[_name] = Endpoint(_name, SEGMENT, V2, message_type=_type)


@dataclass(frozen=True, slots=True)
class Limits:
    """Body limits (bytes, after gunzip): one call, and a batch of messages; the most items in
    a batch; and how far a client's `sentAt` may be from our clock before it counts as skew
    rather than network delay (milliseconds)."""

    single: int
    batch: int
    max_batch_items: int = MAX_BATCH_ITEMS
    clock_skew_ms: int = DEFAULT_CLOCK_SKEW_MS


def body_limit(endpoint_name: str, limits: Limits) -> int:
    """The body limit of an endpoint: the batch limit for batches, the single one otherwise."""
    return limits.batch if ENDPOINTS[endpoint_name].takes == BATCH else limits.single


@dataclass(slots=True)  # not frozen: see Reading
class Accepted:
    """What the durable store keeps for one accepted request."""

    endpoint: str
    key_digest: str
    messages: list[dict]


@dataclass(slots=True)  # not frozen: see Reading
class Outcome:
    """What a door does with an accepted request: store `accepted` durably, then answer
    `status` with `body` (None: an empty body)."""

    accepted: list[Accepted]
    status: int = 202
    body: dict | None = None


def accept(
    endpoint_name: str,
    raw: bytes,
    *,
    authorization: str | None,
    content_encoding: str | None,
    now_ms: int,
    limits: Limits,
) -> Outcome:
    """The one entry point of every door: validate a request to `endpoint_name` (a key of
    ENDPOINTS) and say what to store and how to answer; raise `RequestError` otherwise."""
    endpoint = ENDPOINTS[endpoint_name]
    try:
        return _accept(endpoint, raw, authorization, content_encoding, now_ms, limits, False)
    except InexactReading:  # rare: a trait holds a number at least 2^63
        return _accept(endpoint, raw, authorization, content_encoding, now_ms, limits, True)


def _accept(
    endpoint: Endpoint,
    raw: bytes,
    authorization: str | None,
    content_encoding: str | None,
    now_ms: int,
    limits: Limits,
    exact: bool,
) -> Outcome:
    clock = Clock(now_ms, limits.clock_skew_ms)
    limit = body_limit(endpoint.name, limits)
    if endpoint.takes == CALL:
        if not endpoint.key_in_body:  # a bad key is answered before a bad body
            digest = digest_from_basic_header(authorization)
        reading = parse_json_object(read_body(raw, content_encoding, limit), exact=exact)
        if endpoint.key_in_body:
            digest = digest_key(key_from_body(reading.data))
        assert endpoint.rule is not None
        message = endpoint.rule(reading.data, clock, endpoint.names, reading)
        return Outcome([Accepted(endpoint.name, digest, [message])])

    reading = parse_json_object(read_body(raw, content_encoding, limit), exact=exact)
    digest = segment_key_digest(reading.data, authorization)
    if endpoint.takes == SEGMENT:
        if endpoint.message_type is not None:  # Segment's HTTP API answers as Segment does
            message = messages.segment_message(
                reading.data, clock, reading, message_type=endpoint.message_type
            )
            return Outcome([Accepted(endpoint.name, digest, [message])], 200, {"success": True})
        if not reading.data:  # what Segment's "test connection" posts: a 2xx, nothing to store
            return Outcome([])
        message = messages.segment_message(reading.data, clock, reading)
        return Outcome([Accepted(endpoint.name, digest, [message])])
    return _batch(endpoint.name, digest, clock, reading, limits)


def _batch(
    endpoint_name: str, digest: str, clock: Clock, reading: Reading, limits: Limits
) -> Outcome:
    """POST /v1/batch (and /v1/import): `{"batch": [...], "sentAt": ...}`. Answers 200
    `{"success": true}` because Segment-family SDKs treat anything else as failure; items that
    break the rules are left out, listed in `rejected` and recorded as drops. All items go into
    one stored request, so the whole batch is one write; nothing is stored for an empty one."""
    data = reading.data
    items = data.get("batch")
    if items.__class__ is not list:
        problem = "This field is required." if items is None else "Must be a list of messages."
        raise RequestError(
            400,
            "invalid_fields",
            "The body must carry 'batch', a list of Segment messages.",
            {"batch": [problem]},
        )
    if len(items) > limits.max_batch_items:
        raise RequestError(
            413,
            "too_many_messages",
            f"A batch holds at most {limits.max_batch_items} messages; send the rest in another.",
        )
    errors = FieldErrors()
    batch_sent_at = clock.read(data, "sentAt", errors)
    errors.raise_if_any()

    kept: list[dict] = []
    rejected: list[dict] = []
    for index, item in enumerate(items):
        try:
            message = messages.segment_message(item, clock, reading, batch_sent_at=batch_sent_at)
        except RequestError as error:
            rejection: dict = {"index": index, "code": error.code, "message": error.message}
            if error.fields:
                rejection["fields"] = error.fields
            rejected.append(rejection)
            message = messages.drop_marker(
                messages.DROP_INVALID_MESSAGE, error.summary(), index=index
            )
        else:
            if message["type"] == messages.DROP and message["reason"] != messages.DROP_ANONYMOUS:
                message["index"] = index
                rejected.append(
                    {"index": index, "code": message["reason"], "message": message["detail"]}
                )
        kept.append(message)

    body: dict = {"success": True}
    if rejected:
        body["rejected"] = rejected
    accepted = [Accepted(endpoint_name, digest, kept)] if kept else []
    return Outcome(accepted, status=200, body=body)
