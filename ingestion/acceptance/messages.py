"""One message's fields to what the store keeps: a v1/v2 call, or a Segment-spec message.

A kept message is a small dict of the keys below only, never properties or context:
`{"type", "timestamp", "userId"?, "groupId"?, "event"?, "traits"?, "messageId"?}`. A Segment
message that is well formed but that the service does not use (an unsupported type, a time too far
ahead) becomes a drop marker, which carries no payload: the worker, which knows the product,
records it as a drop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from engagement.presentation import PARENT_TRAIT
from ingestion.acceptance import fields
from ingestion.acceptance.body import Reading
from ingestion.acceptance.errors import FieldErrors, RequestError
from ingestion.acceptance.fields import Clock

SEGMENT_TYPES = frozenset({"identify", "group", "track", "page", "screen", "alias"})
DROP = "drop"
DROP_UNSUPPORTED_TYPE = "unsupported_type"
DROP_TIMESTAMP_IN_FUTURE = "timestamp_in_future"
DROP_INVALID_MESSAGE = "invalid_message"
# A message with an anonymousId and no userId (analytics.js sends page() before identify()): not
# an error, not applied, and not a row in the drop log: the worker counts them per key and day.
DROP_ANONYMOUS = "anonymous"

# The names of the id fields: v2 and Segment messages in camelCase, v1 in snake_case.
V2_NAMES = MappingProxyType({"userId": "userId", "groupId": "groupId"})
V1_NAMES = MappingProxyType({"userId": "user_id", "groupId": "group_id"})


def drop_marker(reason: str, detail: str, *, index: int | None = None) -> dict:
    marker: dict = {"type": DROP, "reason": reason, "detail": detail[:500]}
    if index is not None:
        marker["index"] = index
    return marker


def is_drop(message: Mapping) -> bool:
    return message.get("type") == DROP


def _kept(message_type: str, ts: int, *values: tuple[str, object]) -> dict:
    message = {"type": message_type, "timestamp": ts}
    for key, value in values:
        if value is not None:
            message[key] = value
    return message


def _account_of_event(
    data: Mapping, names: Mapping[str, str], errors: FieldErrors, reading: Reading
) -> str | None:
    """The account an event belongs to: `context.groupId`, else the top-level group id."""
    context = data.get("context")
    if context is not None:
        if context.__class__ is not dict:
            errors.add("context", "Must be a JSON object.")
            return None
        if context.get("groupId") is not None:
            return fields.identifier(context, "groupId", errors, reading, False, "context.groupId")
    return fields.identifier(data, names["groupId"], errors, reading, False)


def _time_checked(ms: int, clock: Clock, errors: FieldErrors) -> int:
    if ms < fields.EARLIEST_MS:
        errors.add("timestamp", fields.TOO_EARLY)
    elif ms > clock.latest_ms:
        errors.add("timestamp", fields.TOO_LATE)
    return ms


# --- v1 and v2 calls -------------------------------------------------------------------------


# identify names a user (and may name its account), group an account (and may name a user).
_NAMED = {"identify": ("userId", "groupId"), "group": ("groupId", "userId")}


def _traits_call(
    message_type: str, data: Mapping, clock: Clock, names: Mapping[str, str], reading: Reading
) -> dict:
    required, optional = _NAMED[message_type]
    errors = FieldErrors()
    first = fields.identifier(data, names[required], errors, reading, True)
    second = fields.identifier(data, names[optional], errors, reading, False)
    traits = fields.traits(data, "traits", errors, reading)
    ts = clock.read(data, "timestamp", errors)
    ts = clock.now_ms if ts is None else _time_checked(ts, clock, errors)
    errors.raise_if_any()
    return _kept(message_type, ts, (required, first), (optional, second), ("traits", traits))


def identify(data: Mapping, clock: Clock, names: Mapping[str, str], reading: Reading) -> dict:
    return _traits_call("identify", data, clock, names, reading)


def group(data: Mapping, clock: Clock, names: Mapping[str, str], reading: Reading) -> dict:
    kept = _traits_call("group", data, clock, names, reading)
    parent = (kept.get("traits") or {}).get(PARENT_TRAIT)
    if parent is not None and parent != "":  # null or "" removes the parent
        errors = FieldErrors()
        fields.identifier(
            kept["traits"], PARENT_TRAIT, errors, reading, True, f"traits.{PARENT_TRAIT}"
        )
        errors.raise_if_any()
    return kept


def track(data: Mapping, clock: Clock, names: Mapping[str, str], reading: Reading) -> dict:
    errors = FieldErrors()
    user_id = fields.identifier(data, names["userId"], errors, reading, True)
    event = fields.identifier(data, "event", errors, reading, True)
    group_id = _account_of_event(data, names, errors, reading)
    ts = clock.read(data, "timestamp", errors)
    ts = clock.now_ms if ts is None else _time_checked(ts, clock, errors)
    errors.raise_if_any()
    message = {"type": "track", "timestamp": ts, "userId": user_id, "event": event}
    if group_id is not None:
        message["groupId"] = group_id
    return message


CallRule = Callable[[Mapping, Clock, Mapping[str, str], Reading], dict]


# --- Segment-spec messages -------------------------------------------------------------------


def _page_event(
    message_type: str, data: Mapping, errors: FieldErrors, reading: Reading
) -> str | None:
    """Page and screen calls become events `Viewed <name> Page` / `Viewed <name> Screen`."""
    suffix = "Page" if message_type == "page" else "Screen"
    name = data.get("name")
    if name is None or (name.__class__ is str and not name.strip()):
        return f"Viewed {suffix}"
    if name.__class__ is not str:
        errors.add("name", "Must be a string.")
        return None
    if reading.scan_strings and (problem := fields.string_problem(name)):
        errors.add("name", problem)
        return None
    event = f"Viewed {name.strip()} {suffix}"
    if len(event) > fields.MAX_ID_LENGTH:
        errors.add("name", f"Must be at most {fields.MAX_ID_LENGTH - len(suffix) - 8} characters.")
        return None
    return event


def _identify_traits(data: Mapping, errors: FieldErrors, reading: Reading) -> dict | None:
    """Identify traits: top-level `traits`, else `context.traits` (where RudderStack's SDKs put
    them)."""
    if data.get("traits") is not None:
        return fields.traits(data, "traits", errors, reading)
    context = data.get("context")
    if context.__class__ is not dict or context.get("traits") is None:
        return None
    traits = context["traits"]
    if traits.__class__ is not dict:  # the same answer as a top-level `traits` that is no object
        errors.add("context.traits", "Must be a JSON object.")
        return None
    if problem := fields.traits_problem(traits, reading):
        errors.add("context.traits", problem)
        return None
    return traits


def _anonymous(data: Mapping, message_type: str) -> bool:
    """A message only an anonymousId names (identify, track, page, screen: a group names its
    account, an alias both ids)."""
    if message_type in ("group", "alias") or data.get("userId") is not None:
        return False
    anonymous_id = data.get("anonymousId")
    return anonymous_id.__class__ is str and bool(anonymous_id.strip())


def _alias(data: Mapping, ts: int, errors: FieldErrors, reading: Reading) -> dict:
    """alias(previousId → userId): the previous id's user is merged into userId's."""
    user_id = fields.identifier(data, "userId", errors, reading, True)
    previous_id = fields.identifier(data, "previousId", errors, reading, True)
    errors.raise_if_any()
    return {"type": "alias", "timestamp": ts, "userId": user_id, "previousId": previous_id}


def _tidied_segment_type(message_type: Any) -> str:
    """A type the SDKs do not send exactly as listed, tidied (case, spaces); a missing or blank
    type breaks the field rules. The answer may still be no supported type."""
    if message_type.__class__ is not str or not message_type.strip():
        errors = FieldErrors()
        errors.add("type", "This field is required: identify, group, track, page, screen or alias.")
        errors.raise_if_any()
    return message_type.strip().lower()


def _segment_time(data: dict, clock: Clock, errors: FieldErrors, batch_sent_at: int | None) -> int:
    """The message time, corrected for clock skew; a time before EARLIEST_MS is a field error."""
    # Both times must be right, whichever one the correction uses.
    timestamp = clock.read(data, "timestamp", errors)
    sent_at = clock.read(data, "sentAt", errors)
    forwarded = data.get("receivedAt") is not None
    ts = clock.corrected(timestamp, batch_sent_at if sent_at is None else sent_at, forwarded)
    if ts < fields.EARLIEST_MS:
        errors.add("timestamp", fields.TOO_EARLY)
    return ts


def _segment_traits_call(
    message_type: str, data: dict, ts: int, errors: FieldErrors, reading: Reading
) -> dict:
    """identify / group: the id it names, the other id it may name, and its traits."""
    key, other = _NAMED[message_type]
    first = fields.identifier(data, key, errors, reading, True)
    second = fields.identifier(data, other, errors, reading, False)
    if message_type == "identify":
        traits = _identify_traits(data, errors, reading)
    else:
        traits = fields.traits(data, "traits", errors, reading)
    errors.raise_if_any()
    message = {"type": message_type, "timestamp": ts, key: first}
    if second is not None:
        message[other] = second
    if traits is not None:
        message["traits"] = traits
    return message


def _segment_event(
    message_type: str, data: dict, ts: int, errors: FieldErrors, reading: Reading
) -> dict:
    """track / page / screen: all kept as a track call of the user's event."""
    user_id = fields.identifier(data, "userId", errors, reading, True)
    if message_type == "track":
        event = fields.identifier(data, "event", errors, reading, True)
    else:
        event = _page_event(message_type, data, errors, reading)
    group_id = _account_of_event(data, V2_NAMES, errors, reading)
    errors.raise_if_any()
    message = {"type": "track", "timestamp": ts, "userId": user_id, "event": event}
    if group_id is not None:
        message["groupId"] = group_id
    return message


def segment_message(
    data: object,
    clock: Clock,
    reading: Reading,
    *,
    batch_sent_at: int | None = None,
    message_type: str | None = None,
) -> dict:
    """One Segment-spec message as the service keeps it (the shape of a v2 call, plus
    `messageId`), or a drop marker; raise `RequestError` for a message that breaks the field
    rules. Every other Segment field is left behind. `message_type`: the type the path names
    (Segment's /v1/track and the like), whatever the body says."""
    if not isinstance(data, dict):
        raise RequestError(400, "invalid_message", "Each message must be a JSON object.")
    if message_type is None:
        message_type = data.get("type")
    # SDKs send the type exactly as listed; anything else is tidied (case, spaces) or refused.
    if message_type.__class__ is not str or message_type not in SEGMENT_TYPES:
        message_type = _tidied_segment_type(message_type)
        if message_type not in SEGMENT_TYPES:
            detail = f"Message type {message_type[:40]!r} is not supported."
            return drop_marker(DROP_UNSUPPORTED_TYPE, detail)
    if _anonymous(data, message_type):
        return drop_marker(DROP_ANONYMOUS, f"An anonymous {message_type} call (no userId).")
    errors = FieldErrors()
    message_id = fields.identifier(data, "messageId", errors, reading, False)
    ts = _segment_time(data, clock, errors, batch_sent_at)
    if message_type == "alias":
        message = _alias(data, ts, errors, reading)
    elif message_type == "identify" or message_type == "group":
        message = _segment_traits_call(message_type, data, ts, errors, reading)
    else:
        message = _segment_event(message_type, data, ts, errors, reading)
    if ts > clock.latest_ms:
        return drop_marker(
            DROP_TIMESTAMP_IN_FUTURE,
            "The message time (after clock-skew correction) is more than 24 hours ahead.",
        )
    if message_id is not None:
        message["messageId"] = message_id
    return message
