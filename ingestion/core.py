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
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        body = decompressor.decompress(raw, limit + 1)
        if len(body) > limit or decompressor.unconsumed_tail:
            raise too_large(limit)
        body += decompressor.flush()
    except zlib.error as exc:
        raise RequestError(400, "invalid_gzip", "The body is not valid gzip.") from exc
    if len(body) > limit:
        raise too_large(limit)
    return body


def parse_json_object(body: bytes) -> dict:
    if not body.strip():
        raise RequestError(400, "invalid_json", "The request body is empty; send a JSON object.")
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(400, "invalid_json", "The request body is not valid JSON.") from exc
    if not isinstance(data, dict):
        raise RequestError(400, "invalid_body", "The request body must be a JSON object.")
    return data


# --- Keys ----------------------------------------------------------------------------------------


def digest_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


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
    return value


def _traits(data: Mapping, name: str, errors: _Fields) -> dict | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        errors.add(name, "Must be a JSON object.")
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
    value = data.get(name)
    if value is None:
        return now_ms
    try:
        ms = parse_timestamp_ms(value)
        datetime.fromtimestamp(ms / 1000, tz=UTC)  # in the range a database can store
    except (ValueError, OverflowError, OSError):
        errors.add(name, "Must be an ISO 8601 date-time or Unix milliseconds.")
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


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    validator: Validator
    names: Mapping[str, str]
    key_in_body: bool


ENDPOINTS: dict[str, Endpoint] = {
    "v2/identify": Endpoint("v2/identify", validate_identify, V2_NAMES, key_in_body=False),
    "v2/group": Endpoint("v2/group", validate_group, V2_NAMES, key_in_body=False),
    "v2/track": Endpoint("v2/track", validate_track, V2_NAMES, key_in_body=False),
    "v1/users": Endpoint("v1/users", validate_identify, V1_NAMES, key_in_body=True),
    "v1/groups": Endpoint("v1/groups", validate_group, V1_NAMES, key_in_body=True),
    "v1/events": Endpoint("v1/events", validate_track, V1_NAMES, key_in_body=True),
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


@dataclass(frozen=True, slots=True)
class Limits:
    """Body limits (bytes, after gunzip): one call, and a batch of messages."""

    single: int
    batch: int


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
    of ENDPOINTS) and say what to store and how to answer; raise `RequestError` otherwise."""
    accepted = accept_call(
        endpoint_name,
        raw,
        authorization=authorization,
        content_encoding=content_encoding,
        now_ms=now_ms,
        max_bytes=limits.single,
    )
    return Outcome(accepted=[accepted])
