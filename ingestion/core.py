"""The acceptance core, free of any web framework: read, authenticate, validate and strip a call.

Every front door (the DRF views, a faster ASGI door) feeds raw bytes and headers in here and
gets back either an `Accepted` (what the durable store keeps) or a `RequestError` to render.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

MAX_FUTURE_MS = 24 * 60 * 60 * 1000
MAX_ID_LENGTH = 255


class RequestError(Exception):
    """A request the service answers with an error; `fields` names the fields at fault."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        fields: dict[str, list[str]] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.fields = fields
        self.retry_after = retry_after

    def body(self) -> dict:
        body: dict = {"code": self.code, "message": self.message}
        if self.fields:
            body["fields"] = self.fields
        return body


@dataclass(frozen=True, slots=True)
class Accepted:
    """What the durable store keeps for one accepted request."""

    endpoint: str
    key_digest: str
    messages: list[dict]


def messages_json(messages: list[dict]) -> str:
    """The JSON text the store writes for accepted messages: orjson's, ten times faster than
    json.dumps, which stays for what orjson refuses (an integer beyond 64 bits in traits)."""
    try:
        return orjson.dumps(messages).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(messages)


# --- Body --------------------------------------------------------------------------------------


def too_large(limit: int) -> RequestError:
    return RequestError(
        413, "payload_too_large", f"The request body is larger than {limit // 1024} KiB."
    )


def read_body(raw: bytes, content_encoding: str | None, limit: int) -> bytes:
    """The body as sent, gunzipped when so encoded; the limit holds for the decompressed size
    too, and decompression stops as soon as it is passed, so a bomb is never expanded."""
    if len(raw) > limit:
        raise too_large(limit)
    encoding = (content_encoding or "").strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding not in ("gzip", "x-gzip"):
        raise RequestError(
            415,
            "unsupported_encoding",
            f"Content-Encoding {encoding!r} is not supported; use gzip.",
        )
    body = b""
    remaining = raw
    try:
        while remaining:  # a gzip stream may hold several members, one after another
            decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            # Never ask for more output than the limit allows: a bomb stops here, unexpanded.
            body += decompressor.decompress(remaining, limit + 1 - len(body))
            if len(body) > limit or decompressor.unconsumed_tail:
                raise too_large(limit)
            body += decompressor.flush()
            if len(body) > limit:
                raise too_large(limit)
            if not decompressor.eof:
                raise RequestError(400, "invalid_gzip", "The gzip body is truncated.")
            remaining = decompressor.unused_data
    except zlib.error as exc:
        raise RequestError(400, "invalid_gzip", "The body is not valid gzip.") from exc
    return body


def _reject_constant(name: str) -> None:
    # Python's json reads NaN and Infinity, which are not JSON and which no database stores.
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # A number beyond a double (1e400) would read as infinity, which no database stores either.
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:40]} is beyond the range of a number")
    return value


def _unstorable(text: str) -> str | None:
    """Why a string cannot be stored as it is (PostgreSQL text and jsonb refuse NUL characters
    and lone surrogates), or None."""
    if "\x00" in text:
        return "Must not contain NUL (\\u0000) characters."
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "Must be valid Unicode (no lone surrogate escapes)."
    return None


def _unstorable_in(value: object) -> str | None:
    """The first reason a string (key or value) somewhere in `value` cannot be stored."""
    pending = [value]  # a stack, not recursion: JSON may nest deeper than Python recurses
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if problem := _unstorable(item):
                return problem
        elif isinstance(item, dict):
            pending.extend(reversed([part for pair in item.items() for part in pair]))
        elif isinstance(item, list):
            pending.extend(reversed(item))
    return None


def parse_json_object(body: bytes) -> dict:
    if not body.strip():
        raise RequestError(400, "invalid_json", "The request body is empty; send a JSON object.")
    try:
        data = json.loads(body, parse_constant=_reject_constant, parse_float=_finite_float)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(400, "invalid_json", "The request body is not valid JSON.") from exc
    except RecursionError as exc:
        raise RequestError(400, "invalid_json", "The request body is nested too deeply.") from exc
    if not isinstance(data, dict):
        raise RequestError(400, "invalid_body", "The request body must be a JSON object.")
    return data


# --- Keys ----------------------------------------------------------------------------------------


def digest_key(key: str) -> str:
    # surrogatepass: a key with a lone surrogate (from a JSON escape) matches no key, not a 500.
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_from_basic_header(header: str | None) -> str:
    """The ingestion key from `Basic <key>` or `Basic base64(<key>:)`."""
    if not header:
        raise RequestError(
            400,
            "missing_authorization",
            "Send the ingestion key in the header 'Authorization: Basic <API_KEY>'.",
        )
    scheme, _, credential = header.strip().partition(" ")
    credential = credential.strip()
    if scheme.lower() != "basic" or not credential or " " in credential:
        raise RequestError(
            400,
            "invalid_authorization",
            "The Authorization header must be 'Basic <API_KEY>' or 'Basic base64(<API_KEY>:)'.",
        )
    try:
        decoded = base64.b64decode(credential, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return credential
    if ":" in decoded:
        user, _, _password = decoded.partition(":")
        if not user:
            raise RequestError(
                400, "invalid_authorization", "The Basic credential carries an empty key."
            )
        return user
    return credential


# --- Fields --------------------------------------------------------------------------------------


class _Fields:
    """Collects field errors so one response names every field at fault."""

    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}

    def add(self, name: str, message: str) -> None:
        self.errors.setdefault(name, []).append(message)

    def raise_if_any(self) -> None:
        if self.errors:
            raise RequestError(
                400, "invalid_fields", "Some fields are missing or not valid.", self.errors
            )


def _identifier(data: Mapping, name: str, errors: _Fields, *, required: bool) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            errors.add(name, "This field is required.")
        return None
    if not isinstance(value, str):
        errors.add(name, "Must be a string.")
        return None
    if not value.strip():
        errors.add(name, "Must not be empty.")
        return None
    if len(value) > MAX_ID_LENGTH:
        errors.add(name, f"Must be at most {MAX_ID_LENGTH} characters.")
        return None
    if problem := _unstorable(value):
        errors.add(name, problem)
        return None
    return value


def _traits(data: Mapping, name: str, errors: _Fields) -> dict | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        errors.add(name, "Must be a JSON object.")
        return None
    if problem := _unstorable_in(value):
        errors.add(name, problem)
        return None
    return value


def parse_timestamp_ms(value: object) -> int:
    """ISO 8601 (an offset or Z; none means UTC) or Unix milliseconds, as Unix milliseconds."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a timestamp")
    if isinstance(value, int | float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("not a finite number")
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise ValueError("empty")
        if text.lstrip("-").isdigit():
            return int(text)
        parsed = datetime.fromisoformat(text.replace("z", "Z"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return int(parsed.timestamp() * 1000)
    raise ValueError("not a string or a number")


def _timestamp(data: Mapping, name: str, now_ms: int, errors: _Fields) -> int:
    ms = _optional_ms(data, name, errors)
    if ms is None:
        return now_ms
    if ms > now_ms + MAX_FUTURE_MS:
        errors.add(name, "Must not be more than 24 hours in the future.")
    return ms


# --- Message shapes ------------------------------------------------------------------------------
# A validated message is a small dict: only the keys below, never properties or context.


def _message(kind: str, ts: int, **values: object) -> dict:
    message = {"type": kind, "timestamp": ts}
    message.update({key: value for key, value in values.items() if value is not None})
    return message


def _context_group_id(data: Mapping, errors: _Fields) -> str | None:
    context = data.get("context")
    if context is None:
        return None
    if not isinstance(context, dict):
        errors.add("context", "Must be a JSON object.")
        return None
    value = context.get("groupId")
    if value is None:
        return None
    sub = _Fields()
    group_id = _identifier(context, "groupId", sub, required=False)
    for message in sub.errors.get("groupId", []):
        errors.add("context.groupId", message)
    return group_id


def validate_identify(data: Mapping, now_ms: int, names: Mapping[str, str]) -> dict:
    errors = _Fields()
    user_id = _identifier(data, names["userId"], errors, required=True)
    group_id = _identifier(data, names["groupId"], errors, required=False)
    traits = _traits(data, "traits", errors)
    ts = _timestamp(data, "timestamp", now_ms, errors)
    errors.raise_if_any()
    return _message("identify", ts, userId=user_id, groupId=group_id, traits=traits)


def validate_group(data: Mapping, now_ms: int, names: Mapping[str, str]) -> dict:
    errors = _Fields()
    group_id = _identifier(data, names["groupId"], errors, required=True)
    user_id = _identifier(data, names["userId"], errors, required=False)
    traits = _traits(data, "traits", errors)
    ts = _timestamp(data, "timestamp", now_ms, errors)
    errors.raise_if_any()
    return _message("group", ts, groupId=group_id, userId=user_id, traits=traits)


def validate_track(data: Mapping, now_ms: int, names: Mapping[str, str]) -> dict:
    errors = _Fields()
    user_id = _identifier(data, names["userId"], errors, required=True)
    event = _identifier(data, "event", errors, required=True)
    # The account the event belongs to: context.groupId, else a top-level group id.
    group_id = _context_group_id(data, errors) or _identifier(
        data, names["groupId"], errors, required=False
    )
    ts = _timestamp(data, "timestamp", now_ms, errors)
    errors.raise_if_any()
    return _message("track", ts, userId=user_id, event=event, groupId=group_id)


V2_NAMES = {"userId": "userId", "groupId": "groupId"}
V1_NAMES = {"userId": "user_id", "groupId": "group_id"}

Validator = Callable[[Mapping, int, Mapping[str, str]], dict]


# What an endpoint takes: one v1/v2 call, one Segment-spec message, or a Segment-SDK batch.
CALL, SEGMENT, BATCH = "call", "segment", "batch"


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    validator: Validator | None
    names: Mapping[str, str]
    key_in_body: bool
    kind: str = CALL


ENDPOINTS: dict[str, Endpoint] = {
    "v2/identify": Endpoint("v2/identify", validate_identify, V2_NAMES, key_in_body=False),
    "v2/group": Endpoint("v2/group", validate_group, V2_NAMES, key_in_body=False),
    "v2/track": Endpoint("v2/track", validate_track, V2_NAMES, key_in_body=False),
    "v1/users": Endpoint("v1/users", validate_identify, V1_NAMES, key_in_body=True),
    "v1/groups": Endpoint("v1/groups", validate_group, V1_NAMES, key_in_body=True),
    "v1/events": Endpoint("v1/events", validate_track, V1_NAMES, key_in_body=True),
    # Segment-family clients: the key comes as Basic (either form) or as `writeKey` in the body.
    "segment": Endpoint("segment", None, V2_NAMES, key_in_body=False, kind=SEGMENT),
    "v1/batch": Endpoint("v1/batch", None, V2_NAMES, key_in_body=False, kind=BATCH),
    "v1/import": Endpoint("v1/import", None, V2_NAMES, key_in_body=False, kind=BATCH),
}


def key_from_body(data: Mapping) -> str:
    key = data.get("api_key")
    if key is None:
        raise RequestError(
            400,
            "missing_api_key",
            "Send the ingestion key in the body field 'api_key'.",
            {"api_key": ["This field is required."]},
        )
    if not isinstance(key, str) or not key.strip():
        raise RequestError(
            400,
            "invalid_api_key",
            "The body field 'api_key' must be a non-empty string.",
            {"api_key": ["Must be a non-empty string."]},
        )
    return key.strip()


MAX_BATCH_ITEMS = 2500
DEFAULT_CLOCK_SKEW_MS = 5000


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
    return limits.batch if ENDPOINTS[endpoint_name].kind == BATCH else limits.single


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a front door does with a request the core accepted: store `accepted` durably, then
    answer `status` with `body` (None: an empty body)."""

    accepted: list[Accepted]
    status: int = 202
    body: dict | None = None


def accept_call(
    endpoint_name: str,
    raw: bytes,
    *,
    authorization: str | None,
    content_encoding: str | None,
    now_ms: int,
    max_bytes: int,
) -> Accepted:
    """Validate one v1 or v2 call; raise `RequestError` for anything the client must fix."""
    endpoint = ENDPOINTS[endpoint_name]
    if endpoint.key_in_body:
        data = parse_json_object(read_body(raw, content_encoding, max_bytes))
        key = key_from_body(data)
    else:
        key = key_from_basic_header(authorization)
        data = parse_json_object(read_body(raw, content_encoding, max_bytes))
    message = endpoint.validator(data, now_ms, endpoint.names)
    return Accepted(endpoint=endpoint.name, key_digest=digest_key(key), messages=[message])


def accept(
    endpoint_name: str,
    raw: bytes,
    *,
    authorization: str | None,
    content_encoding: str | None,
    now_ms: int,
    limits: Limits,
) -> Outcome:
    """The one entry point every front door calls: validate a request to `endpoint_name` (a key
    of ENDPOINTS) and say what to store and how to answer; raise `RequestError` otherwise.

    Well-formed requests take the fast path (see `accept_fast`); anything it does not vouch for,
    every error included, goes through `accept_checked`, which decides alone what is wrong."""
    endpoint = ENDPOINTS[endpoint_name]
    if endpoint.kind == CALL and not endpoint.key_in_body:
        # The key is checked before the body is read, so a bad key wins over a bad body.
        if _digest_from_header(authorization) is None:
            return accept_checked(
                endpoint_name,
                raw,
                authorization=authorization,
                content_encoding=content_encoding,
                now_ms=now_ms,
                limits=limits,
            )
    body = read_body(raw, content_encoding, body_limit(endpoint_name, limits))
    outcome = accept_fast(endpoint, body, authorization=authorization, now_ms=now_ms, limits=limits)
    if outcome is not None:
        return outcome
    # `body` is already gunzipped and within the limit: the checked path reads it as is.
    return accept_checked(
        endpoint_name,
        body,
        authorization=authorization,
        content_encoding=None,
        now_ms=now_ms,
        limits=limits,
    )


def accept_checked(
    endpoint_name: str,
    raw: bytes,
    *,
    authorization: str | None,
    content_encoding: str | None,
    now_ms: int,
    limits: Limits,
) -> Outcome:
    """`accept` by the rules as written, field by field: the reference the fast path must match,
    and the path every request it does not vouch for takes."""
    kind = ENDPOINTS[endpoint_name].kind
    if kind == SEGMENT:
        return accept_segment(
            endpoint_name,
            raw,
            authorization=authorization,
            content_encoding=content_encoding,
            now_ms=now_ms,
            limits=limits,
        )
    if kind == BATCH:
        return accept_batch(
            endpoint_name,
            raw,
            authorization=authorization,
            content_encoding=content_encoding,
            now_ms=now_ms,
            limits=limits,
        )
    accepted = accept_call(
        endpoint_name,
        raw,
        authorization=authorization,
        content_encoding=content_encoding,
        now_ms=now_ms,
        max_bytes=limits.single,
    )
    return Outcome(accepted=[accepted])


# --- Segment-format messages ---------------------------------------------------------------------
# A Segment message that is well formed but cannot be applied (a type the service does not use, a
# time too far ahead) is still accepted: it is stored as a drop marker, which carries no payload,
# and the worker, which knows the product, records it as a DroppedRequest.

SEGMENT_TYPES = frozenset({"identify", "group", "track", "page", "screen"})
DROP = "drop"
DROP_UNSUPPORTED_TYPE = "unsupported_type"
DROP_TIMESTAMP_IN_FUTURE = "timestamp_in_future"
DROP_INVALID_MESSAGE = "invalid_message"


def drop_marker(reason: str, detail: str, *, index: int | None = None) -> dict:
    marker: dict = {"type": DROP, "reason": reason, "detail": detail[:500]}
    if index is not None:
        marker["index"] = index
    return marker


def is_drop(message: Mapping) -> bool:
    return message.get("type") == DROP


def _segment_key(data: Mapping, authorization: str | None) -> str:
    """The write key from `Basic` (either form), else from `writeKey` in the body. Without
    one the answer is 401: retrying cannot fix it."""
    error: RequestError | None = None
    if authorization:
        try:
            return key_from_basic_header(authorization)
        except RequestError as exc:
            error = exc
    write_key = data.get("writeKey")
    if isinstance(write_key, str) and write_key.strip():
        return write_key.strip()
    if error is not None:
        raise RequestError(401, error.code, error.message)
    raise RequestError(
        401,
        "missing_authorization",
        "Send the write key as 'Authorization: Basic base64(<KEY>:)' or as 'writeKey' in the body.",
    )


def _optional_ms(data: Mapping, name: str, errors: _Fields) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    try:
        ms = parse_timestamp_ms(value)
        datetime.fromtimestamp(ms / 1000, tz=UTC)  # in the range a database can store
    except (ValueError, OverflowError, OSError):
        errors.add(name, "Must be an ISO 8601 date-time or Unix milliseconds.")
        return None
    return ms


def _segment_timestamp(
    data: Mapping, *, now_ms: int, batch_sent_at: int | None, clock_skew_ms: int, errors: _Fields
) -> int:
    """The message time, corrected for client clock skew as Segment does:
    timestamp = receivedAt - (sentAt - timestamp), where sentAt is the message's own, else the
    batch's. Only a gap beyond `clock_skew_ms` counts as skew, so network delay does not shift
    times. A message carrying `receivedAt` was already corrected by the pipeline that forwards
    it (Segment, RudderStack), so it is taken as is."""
    timestamp = _optional_ms(data, "timestamp", errors)
    sent_at = _optional_ms(data, "sentAt", errors)
    if timestamp is None:
        return now_ms
    if sent_at is None:
        sent_at = batch_sent_at
    if sent_at is None or data.get("receivedAt") is not None:
        return timestamp
    if abs(now_ms - sent_at) > clock_skew_ms:
        return now_ms - (sent_at - timestamp)
    return timestamp


def _message_id(data: Mapping, errors: _Fields) -> str | None:
    return _identifier(data, "messageId", errors, required=False)


def _page_event(kind: str, data: Mapping, errors: _Fields) -> str | None:
    """Page and screen calls become events `Viewed <name> Page` / `Viewed <name> Screen`."""
    suffix = "Page" if kind == "page" else "Screen"
    name = data.get("name")
    if name is None or (isinstance(name, str) and not name.strip()):
        return f"Viewed {suffix}"
    if not isinstance(name, str):
        errors.add("name", "Must be a string.")
        return None
    if problem := _unstorable(name):
        errors.add("name", problem)
        return None
    event = f"Viewed {name.strip()} {suffix}"
    if len(event) > MAX_ID_LENGTH:
        errors.add("name", f"Must be at most {MAX_ID_LENGTH - len(suffix) - 8} characters.")
        return None
    return event


def _identify_traits(data: Mapping, errors: _Fields) -> dict | None:
    """Identify traits: top-level `traits`, else `context.traits` (where RudderStack's SDKs put
    them)."""
    traits = _traits(data, "traits", errors)
    if traits is None and "traits" not in errors.errors:
        context = data.get("context")
        if isinstance(context, dict) and isinstance(context.get("traits"), dict):
            if problem := _unstorable_in(context["traits"]):
                errors.add("context.traits", problem)
                return None
            traits = context["traits"]
    return traits


def segment_message(
    data: object, *, now_ms: int, batch_sent_at: int | None = None, clock_skew_ms: int
) -> dict:
    """Validate one Segment-spec message into what the service stores (the same shape as a v2
    call, plus `messageId`), or a drop marker; raise `RequestError` for a message that breaks
    the field rules. Every other Segment field is left behind."""
    if not isinstance(data, dict):
        raise RequestError(400, "invalid_message", "Each message must be a JSON object.")
    errors = _Fields()
    kind = data.get("type")
    if not isinstance(kind, str) or not kind.strip():
        errors.add("type", "This field is required: identify, group, track, page or screen.")
        errors.raise_if_any()
    kind = kind.strip().lower()
    if kind not in SEGMENT_TYPES:
        return drop_marker(DROP_UNSUPPORTED_TYPE, f"Message type {kind[:40]!r} is not supported.")
    message_id = _message_id(data, errors)
    ts = _segment_timestamp(
        data,
        now_ms=now_ms,
        batch_sent_at=batch_sent_at,
        clock_skew_ms=clock_skew_ms,
        errors=errors,
    )
    if kind == "identify":
        user_id = _identifier(data, "userId", errors, required=True)
        group_id = _identifier(data, "groupId", errors, required=False)
        values = {"userId": user_id, "groupId": group_id, "traits": _identify_traits(data, errors)}
    elif kind == "group":
        group_id = _identifier(data, "groupId", errors, required=True)
        user_id = _identifier(data, "userId", errors, required=False)
        values = {"groupId": group_id, "userId": user_id, "traits": _traits(data, "traits", errors)}
    else:
        user_id = _identifier(data, "userId", errors, required=True)
        if kind == "track":
            event = _identifier(data, "event", errors, required=True)
        else:
            event = _page_event(kind, data, errors)
        group_id = _context_group_id(data, errors) or _identifier(
            data, "groupId", errors, required=False
        )
        values = {"userId": user_id, "event": event, "groupId": group_id}
        kind = "track"
    errors.raise_if_any()
    if ts > now_ms + MAX_FUTURE_MS:
        return drop_marker(
            DROP_TIMESTAMP_IN_FUTURE,
            "The message time (after clock-skew correction) is more than 24 hours ahead.",
        )
    return _message(kind, ts, **values, messageId=message_id)


def accept_segment(
    endpoint_name: str,
    raw: bytes,
    *,
    authorization: str | None,
    content_encoding: str | None,
    now_ms: int,
    limits: Limits,
) -> Outcome:
    """POST /segment: one Segment-spec message, applied as the equivalent v2 call; 202."""
    data = parse_json_object(read_body(raw, content_encoding, limits.single))
    key = _segment_key(data, authorization)
    message = segment_message(data, now_ms=now_ms, clock_skew_ms=limits.clock_skew_ms)
    return Outcome(
        accepted=[Accepted(endpoint=endpoint_name, key_digest=digest_key(key), messages=[message])]
    )


def _rejection(index: int, error: RequestError) -> dict:
    rejected: dict = {"index": index, "code": error.code, "message": error.message}
    if error.fields:
        rejected["fields"] = error.fields
    return rejected


def _fields_summary(error: RequestError) -> str:
    if not error.fields:
        return error.message
    return "; ".join(f"{name}: {' '.join(problems)}" for name, problems in error.fields.items())


def accept_batch(
    endpoint_name: str,
    raw: bytes,
    *,
    authorization: str | None,
    content_encoding: str | None,
    now_ms: int,
    limits: Limits,
) -> Outcome:
    """POST /v1/batch (and /v1/import): `{"batch": [...], "sentAt": ...}`. Answers 200
    `{"success": true}` because Segment-family SDKs treat anything else as failure; items that
    break the rules are left out, listed in `rejected` and recorded as drops. All items go into
    one stored request, so the whole batch is one write."""
    data = parse_json_object(read_body(raw, content_encoding, limits.batch))
    key = _segment_key(data, authorization)
    items = data.get("batch")
    if not isinstance(items, list):
        raise RequestError(
            400,
            "invalid_fields",
            "The body must carry 'batch', a list of Segment messages.",
            {
                "batch": [
                    "Must be a list of messages."
                    if items is not None
                    else "This field is required."
                ]
            },
        )
    if len(items) > limits.max_batch_items:
        raise RequestError(
            413,
            "too_many_messages",
            f"A batch holds at most {limits.max_batch_items} messages; send the rest in another.",
        )
    errors = _Fields()
    batch_sent_at = _optional_ms(data, "sentAt", errors)
    errors.raise_if_any()

    messages: list[dict] = []
    rejected: list[dict] = []
    for index, item in enumerate(items):
        try:
            message = segment_message(
                item,
                now_ms=now_ms,
                batch_sent_at=batch_sent_at,
                clock_skew_ms=limits.clock_skew_ms,
            )
        except RequestError as error:
            rejected.append(_rejection(index, error))
            messages.append(drop_marker(DROP_INVALID_MESSAGE, _fields_summary(error), index=index))
            continue
        if is_drop(message):
            message["index"] = index
            rejected.append(
                {"index": index, "code": message["reason"], "message": message["detail"]}
            )
        messages.append(message)

    return batch_outcome(endpoint_name, digest_key(key), messages, rejected)


def batch_outcome(
    endpoint_name: str, key_digest: str, messages: list[dict], rejected: list[dict]
) -> Outcome:
    """200 {"success": true, "rejected": [...]} for a batch; its messages (drop markers
    included) stored as one request, nothing stored for an empty batch."""
    body: dict = {"success": True}
    if rejected:
        body["rejected"] = rejected
    if not messages:
        return Outcome(accepted=[], status=200, body=body)
    accepted = Accepted(endpoint=endpoint_name, key_digest=key_digest, messages=messages)
    return Outcome(accepted=[accepted], status=200, body=body)


# --- The fast path -------------------------------------------------------------------------------
# The checked path above reads every field through small helpers that collect errors; at 10 us
# and more a message it, not the database, bounded how many batched events a core accepts. The
# fast path below takes a request only when every field is already right and builds exactly
# the result the checked path would (tests/ingestion/test_core_fast_path.py holds it to that);
# at the first thing it does not vouch for it gives up (None) and the checked path starts over,
# so every error, drop and message comes from the rules as written.
#
# orjson reads the body several times faster than Python's json, and is stricter: it refuses
# NaN, Infinity, numbers beyond a double, lone surrogates and a byte order mark, and a body it
# refuses goes to the checked path, which reads it with Python's json as before. Where orjson
# accepts, both read the same values, except one: an integer beyond 64 bits, which orjson reads
# as a float. Such a number can only matter where a value is stored as sent (traits), so those
# are looked at for floats that large (`_exact`). A string can only hold NUL when the body has
# the escape \u0000; without it, no string needs the NUL and surrogate scans.

_FAST_KINDS = frozenset({"identify", "group", "track", "page", "screen"})
_BIG = 2.0**63  # orjson reads an integer literal beyond 64 bits as a float at least this large
# Unix ms that `datetime.fromtimestamp` surely takes (years 3 to 9980): no need to try it.
_SAFE_MS_LOW, _SAFE_MS_HIGH = -62_000_000_000_000, 253_000_000_000_000
_NUL_ESCAPE = b"\\u0000"
_DIGEST_CACHE_SIZE = 4096
_header_digests: dict[str, str] = {}


def _digest_from_header(authorization: str | None) -> str | None:
    """The key digest for a Basic header, remembered for the next call with the same header;
    None when the header does not carry a key (the checked path says why)."""
    if authorization is None:
        return None
    digest = _header_digests.get(authorization)
    if digest is None:
        try:
            digest = digest_key(key_from_basic_header(authorization))
        except RequestError:
            return None
        if len(_header_digests) >= _DIGEST_CACHE_SIZE:
            _header_digests.clear()
        _header_digests[authorization] = digest
    return digest


def _fast_object(body: bytes) -> dict | None:
    """The JSON object in `body` when orjson reads it and no string in it can hold NUL; else
    None."""
    if _NUL_ESCAPE in body:
        return None
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return data if data.__class__ is dict else None


def _exact(value: object) -> bool:
    """False when `value` holds a float so large it may be an integer orjson read as a float."""
    cls = value.__class__
    if cls is dict:
        for item in value.values():  # type: ignore[attr-defined]
            if not _exact(item):
                return False
    elif cls is list:
        for item in value:  # type: ignore[attr-defined]
            if not _exact(item):
                return False
    elif cls is float:
        return -_BIG < value < _BIG  # type: ignore[operator]
    return True


def _fast_id(value: object) -> bool:
    """`_identifier`'s rules for a present value (the NUL and surrogate scans are not needed)."""
    return value.__class__ is str and len(value) <= MAX_ID_LENGTH and value.strip() != ""  # type: ignore[arg-type]


def _fast_traits(value: object) -> bool:
    try:
        return value.__class__ is dict and _exact(value)
    except RecursionError:  # nested deeper than Python recurses: the checked path decides
        return False


def _fast_ms(value: object, cache: dict) -> int | None:
    """`_optional_ms` for a value present and right (its Unix ms), else None; `cache` keeps the
    times of one request, which often repeat."""
    if value.__class__ is int:
        return value if _SAFE_MS_LOW < value < _SAFE_MS_HIGH else None  # type: ignore[operator,return-value]
    if value.__class__ is not str:
        return None
    ms = cache.get(value)
    if ms is None:
        try:
            ms = _iso_ms(value)  # type: ignore[arg-type]
        except (ValueError, OverflowError, OSError):
            return None
        if not _SAFE_MS_LOW < ms < _SAFE_MS_HIGH:
            return None
        cache[value] = ms
    return ms


def _iso_ms(text: str) -> int:
    """`parse_timestamp_ms` of a string, a third faster for the ISO 8601 times SDKs send: when
    `fromisoformat` takes the text as it is, and it is not Unix ms (a `-` after the year) and
    has no `z` to upper-case, the stripping and checks before it change nothing."""
    if text[4:5] == "-" and "z" not in text:
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return parse_timestamp_ms(text)  # whatever it says: spaces around, a lower-case z
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return int(parsed.timestamp() * 1000)
    return parse_timestamp_ms(text)


def _fast_group_id(context: object, group_id: object) -> tuple[bool, str | None]:
    """`_context_group_id(...) or <groupId>` of a track: (right, the group id)."""
    if context is not None:
        if context.__class__ is not dict:
            return False, None
        in_context = context.get("groupId")  # type: ignore[attr-defined]
        if in_context is not None:
            return _fast_id(in_context), in_context
    return group_id is None or _fast_id(group_id), group_id  # type: ignore[return-value]


def _fast_segment(
    data: object, now_ms: int, batch_sent_at: int | None, clock_skew_ms: int, cache: dict
) -> dict | None:
    """What `segment_message` returns for a message it takes, or None to let it decide.
    The checks of `_fast_id` are written out here: this runs for every message of a batch."""
    if data.__class__ is not dict:
        return None
    get = data.get  # type: ignore[attr-defined]
    kind = get("type")
    if kind.__class__ is not str:
        return None
    if kind not in _FAST_KINDS:
        if not kind.strip():
            return None
        kind = kind.strip().lower()
        if kind not in SEGMENT_TYPES:
            return drop_marker(
                DROP_UNSUPPORTED_TYPE, f"Message type {kind[:40]!r} is not supported."
            )
    message_id = get("messageId")
    if message_id is not None and (
        message_id.__class__ is not str or len(message_id) > MAX_ID_LENGTH or not message_id.strip()
    ):
        return None
    # _segment_timestamp: both times must be right, whichever is used.
    timestamp = get("timestamp")
    if timestamp is not None:
        timestamp = (cache.get(timestamp) if timestamp.__class__ is str else None) or _fast_ms(
            timestamp, cache
        )
        if timestamp is None:
            return None
    sent_at = get("sentAt")
    if sent_at is not None:
        sent_at = _fast_ms(sent_at, cache)
        if sent_at is None:
            return None
    if timestamp is None:
        ts = now_ms
    else:
        if sent_at is None:
            sent_at = batch_sent_at
        if sent_at is None or get("receivedAt") is not None:
            ts = timestamp
        elif abs(now_ms - sent_at) > clock_skew_ms:
            ts = now_ms - (sent_at - timestamp)
        else:
            ts = timestamp

    user_id = get("userId")
    if kind == "identify":
        group_id = get("groupId")
        traits = get("traits")
        if not _fast_id(user_id) or (group_id is not None and not _fast_id(group_id)):
            return None
        if traits is None:
            context = get("context")
            if context.__class__ is dict and context.get("traits").__class__ is dict:
                traits = context["traits"]
        if traits is not None and not _fast_traits(traits):
            return None
        message = {"type": "identify", "timestamp": ts, "userId": user_id}
        if group_id is not None:
            message["groupId"] = group_id
    elif kind == "group":
        group_id = get("groupId")
        traits = get("traits")
        if not _fast_id(group_id) or (user_id is not None and not _fast_id(user_id)):
            return None
        if traits is not None and not _fast_traits(traits):
            return None
        message = {"type": "group", "timestamp": ts, "groupId": group_id}
        if user_id is not None:
            message["userId"] = user_id
    else:
        traits = None
        if user_id.__class__ is not str or len(user_id) > MAX_ID_LENGTH or not user_id.strip():
            return None
        if kind == "track":
            event = get("event")
            if event.__class__ is not str or len(event) > MAX_ID_LENGTH or not event.strip():
                return None
        else:
            suffix = "Page" if kind == "page" else "Screen"
            name = get("name")
            if name is None or (name.__class__ is str and not name.strip()):
                event = f"Viewed {suffix}"
            elif name.__class__ is str:
                event = f"Viewed {name.strip()} {suffix}"
                if len(event) > MAX_ID_LENGTH:
                    return None
            else:
                return None
        # The account: context.groupId, else the top-level groupId (`_context_group_id`).
        group_id = None
        context = get("context")
        if context is not None:
            if context.__class__ is not dict:
                return None
            group_id = context.get("groupId")
        if group_id is None:
            group_id = get("groupId")
        if group_id is not None and (
            group_id.__class__ is not str or len(group_id) > MAX_ID_LENGTH or not group_id.strip()
        ):
            return None
        message = {"type": "track", "timestamp": ts, "userId": user_id, "event": event}
        if group_id is not None:
            message["groupId"] = group_id
    if ts > now_ms + MAX_FUTURE_MS:
        return drop_marker(
            DROP_TIMESTAMP_IN_FUTURE,
            "The message time (after clock-skew correction) is more than 24 hours ahead.",
        )
    if traits is not None:
        message["traits"] = traits
    if message_id is not None:
        message["messageId"] = message_id
    return message


def _fast_call(endpoint: Endpoint, data: dict, now_ms: int) -> dict | None:
    """What the endpoint's validator returns for a call it takes, or None to let it decide."""
    names = endpoint.names
    user_id = data.get(names["userId"])
    group_id = data.get(names["groupId"])
    value = data.get("timestamp")
    if value is None:
        ts = now_ms
    else:
        ts = _fast_ms(value, {})
        if ts is None or ts > now_ms + MAX_FUTURE_MS:
            return None
    validator = endpoint.validator
    if validator is validate_track:
        event = data.get("event")
        if not _fast_id(user_id) or not _fast_id(event):
            return None
        right, group_id = _fast_group_id(data.get("context"), group_id)
        if not right:
            return None
        message = {"type": "track", "timestamp": ts, "userId": user_id, "event": event}
        if group_id is not None:
            message["groupId"] = group_id
        return message
    traits = data.get("traits")
    if traits is not None and not _fast_traits(traits):
        return None
    if validator is validate_identify:
        if not _fast_id(user_id) or (group_id is not None and not _fast_id(group_id)):
            return None
        message = {"type": "identify", "timestamp": ts, "userId": user_id}
        if group_id is not None:
            message["groupId"] = group_id
    elif validator is validate_group:
        if not _fast_id(group_id) or (user_id is not None and not _fast_id(user_id)):
            return None
        message = {"type": "group", "timestamp": ts, "groupId": group_id}
        if user_id is not None:
            message["userId"] = user_id
    else:
        return None
    if traits is not None:
        message["traits"] = traits
    return message


def _fast_segment_key(data: dict, authorization: str | None) -> str | None:
    """`_segment_key`'s digest when a key is there, else None."""
    if authorization:
        return _digest_from_header(authorization)
    write_key = data.get("writeKey")
    if write_key.__class__ is str and write_key.strip():
        return digest_key(write_key.strip())  # type: ignore[union-attr]
    return None


def accept_fast(
    endpoint: Endpoint, body: bytes, *, authorization: str | None, now_ms: int, limits: Limits
) -> Outcome | None:
    """`accept_checked`'s outcome for a request whose every field is right, from the body as
    read (gunzipped, within its limit); None when the checked path must decide."""
    data = _fast_object(body)
    if data is None:
        return None
    if endpoint.kind == CALL:
        if endpoint.key_in_body:
            key = data.get("api_key")
            if key.__class__ is not str or not key.strip():
                return None
            digest = digest_key(key.strip())
        else:
            digest = _digest_from_header(authorization)
        message = _fast_call(endpoint, data, now_ms)
        if digest is None or message is None:
            return None
        return Outcome(accepted=[Accepted(endpoint.name, digest, [message])])

    digest = _fast_segment_key(data, authorization)
    if digest is None:
        return None
    if endpoint.kind == SEGMENT:
        message = _fast_segment(data, now_ms, None, limits.clock_skew_ms, {})
        if message is None:
            return None
        return Outcome(accepted=[Accepted(endpoint.name, digest, [message])])

    items = data.get("batch")
    if items.__class__ is not list or not items or len(items) > limits.max_batch_items:
        return None
    cache: dict = {}
    batch_sent_at = data.get("sentAt")
    if batch_sent_at is not None:
        batch_sent_at = _fast_ms(batch_sent_at, cache)
        if batch_sent_at is None:
            return None
    skew = limits.clock_skew_ms
    messages = []
    rejected = []
    for index, item in enumerate(items):
        message = _fast_segment(item, now_ms, batch_sent_at, skew, cache)
        if message is None:
            # One message the fast path does not vouch for: the checked rules decide on it
            # alone. Read by orjson, it differs from Python's reading only in an integer beyond
            # 64 bits, which matters only in traits kept; then the checked path reads the body.
            try:
                message = segment_message(
                    item, now_ms=now_ms, batch_sent_at=batch_sent_at, clock_skew_ms=skew
                )
            except RequestError as error:
                rejected.append(_rejection(index, error))
                summary = _fields_summary(error)
                messages.append(drop_marker(DROP_INVALID_MESSAGE, summary, index=index))
                continue
            if "traits" in message and not _fast_traits(message["traits"]):
                return None
        if message["type"] == DROP:
            message["index"] = index
            rejected.append(
                {"index": index, "code": message["reason"], "message": message["detail"]}
            )
        messages.append(message)
    return batch_outcome(endpoint.name, digest, messages, rejected)
