"""The rules for one field's value: identifiers, traits, times. Each is written once here, and
every endpoint uses it; a value that passes is one the worker and the database
take (see docs/ingestion.md, "What is accepted")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ingestion.acceptance.body import InexactReading, Reading, json_size_bytes
from ingestion.acceptance.errors import FieldErrors

MAX_ID_LENGTH = 255
MAX_FUTURE_MS = 24 * 60 * 60 * 1000
EARLIEST_MS = 0  # 1970-01-01T00:00:00Z: no product's data is older
# A number below this, read as Unix ms, is a time before 1973-03-03: far likelier Unix seconds
# (any time from 1970 to 5138) sent where milliseconds are due, which would be stored in 1970.
SECONDS_LIKE_BELOW_MS = 100_000_000_000
MAX_TRAITS_DEPTH = 32  # the traits object itself is the first level
MAX_TRAIT_NAME_LENGTH = 255
MAX_TRAITS_BYTES = 32 * 1024  # of one message's traits, as compact JSON in UTF-8
_INEXACT = 2.0**63  # orjson reads an integer literal beyond 64 bits as a float at least this large


def string_problem(text: str) -> str | None:
    """Why a string cannot be stored as it is (PostgreSQL's text and jsonb refuse NUL characters
    and lone surrogates), or None."""
    if "\x00" in text:
        return "Must not contain NUL (\\u0000) characters."
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "Must be valid Unicode (no lone surrogate escapes)."
    return None


def identifier(
    data: Mapping,
    name: str,
    errors: FieldErrors,
    reading: Reading,
    required: bool,
    label: str | None = None,
) -> str | None:
    """The id in `data[name]`, or None with its problem in `errors` (under `label`, else `name`):
    a string of 1 to 255 characters, not blank, that the database stores."""
    value = data.get(name)
    if value is None:
        if required:
            errors.add(label or name, "This field is required.")
        return None
    if value.__class__ is not str:
        problem: str | None = "Must be a string."
    elif not value or value.isspace():
        problem = "Must not be empty."
    elif len(value) > MAX_ID_LENGTH:
        problem = f"Must be at most {MAX_ID_LENGTH} characters."
    elif reading.scan_strings:
        problem = string_problem(value)
    else:
        return value
    if problem is None:
        return value
    errors.add(label or name, problem)
    return None


def traits_problem(traits: dict, reading: Reading) -> str | None:
    """Why a traits object cannot be stored and merged as it is, or None. One walk, without
    recursion (a body may nest deeper than Python recurses). Raises `InexactReading` at a number
    orjson may have read inexactly."""
    scan_strings = reading.scan_strings
    pending: list[tuple[Any, int]] = [(traits, 1)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_TRAITS_DEPTH:
            return f"Must nest at most {MAX_TRAITS_DEPTH} levels deep."
        if value.__class__ is dict:
            for name in value:
                if len(name) > MAX_TRAIT_NAME_LENGTH:
                    return f"Trait names must be at most {MAX_TRAIT_NAME_LENGTH} characters."
                if scan_strings and (problem := string_problem(name)):
                    return problem
            children: Iterable[Any] = value.values()
        else:
            children = value  # a list
        for child in children:
            cls = child.__class__
            if cls is dict or cls is list:
                pending.append((child, depth + 1))
            elif cls is str:
                if scan_strings and (problem := string_problem(child)):
                    return problem
            elif cls is float and not reading.exact and not -_INEXACT < child < _INEXACT:
                raise InexactReading
    if json_size_bytes(traits) > MAX_TRAITS_BYTES:
        return f"Must be at most {MAX_TRAITS_BYTES // 1024} KiB (32,768 bytes) as UTF-8 JSON."
    return None


def traits(data: Mapping, name: str, errors: FieldErrors, reading: Reading) -> dict | None:
    value = data.get(name)
    if value is None:
        return None
    if value.__class__ is not dict:
        errors.add(name, "Must be a JSON object.")
        return None
    if problem := traits_problem(value, reading):
        errors.add(name, problem)
        return None
    return value


# --- Times -----------------------------------------------------------------------------------


def parse_timestamp_ms(value: object) -> int:
    """ISO 8601 (an offset or Z; none means UTC) or Unix milliseconds, as Unix milliseconds;
    ValueError (or OverflowError) for anything else."""
    cls = value.__class__
    if cls is int:
        return value  # type: ignore[return-value]
    if cls is float:
        return int(value)  # type: ignore[call-overload]  # finite: both JSON readers see to it
    if cls is not str:
        raise ValueError("not a string or a number")
    if value[4:5] == "-":  # type: ignore[index]  # ISO 8601 as SDKs send it: read as it is
        try:
            parsed = datetime.fromisoformat(value)  # type: ignore[arg-type]
        except ValueError:
            parsed = None
        if parsed is not None:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return int(parsed.timestamp() * 1000)
    text = value.strip()  # type: ignore[attr-defined]
    if text.lstrip("-").isdigit():
        return int(text)
    parsed = datetime.fromisoformat(text.replace("z", "Z"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


class Clock:
    """The times of one request: now, the clock-skew allowance, and the times read so far (the
    messages of a batch often repeat them)."""

    __slots__ = ("now_ms", "skew_ms", "latest_ms", "_read")

    def __init__(self, now_ms: int, skew_ms: int) -> None:
        self.now_ms = now_ms
        self.skew_ms = skew_ms
        # A message time must lie in [EARLIEST_MS, latest_ms]; beyond, nothing is stored for it.
        self.latest_ms = now_ms + MAX_FUTURE_MS
        self._read: dict[object, int] = {}

    def read(self, data: Mapping, name: str, errors: FieldErrors) -> int | None:
        """A time field as Unix ms, None when absent; a field error when it is not a time."""
        value = data.get(name)
        if value is None:
            return None
        if value.__class__ is str:
            ms = self._read.get(value)
            if ms is not None:
                return ms
        try:
            ms = parse_timestamp_ms(value)
        except (ValueError, OverflowError):
            errors.add(name, "Must be an ISO 8601 date-time or Unix milliseconds.")
            return None
        if 0 <= ms < SECONDS_LIKE_BELOW_MS and _is_number(value):
            errors.add(name, LOOKS_LIKE_SECONDS)
            return None
        if value.__class__ is str:
            self._read[value] = ms
        return ms

    def corrected(self, timestamp: int | None, sent_at: int | None, forwarded: bool) -> int:
        """The message time, corrected for client clock skew as Segment does:
        timestamp = receivedAt - (sentAt - timestamp). Only a gap beyond the allowance counts
        as skew, so network delay does not shift times. A message a pipeline forwards
        (`receivedAt` set: Segment, RudderStack) was corrected there and is taken as is."""
        if timestamp is None:
            return self.now_ms
        if sent_at is None or forwarded:
            return timestamp
        if abs(self.now_ms - sent_at) > self.skew_ms:
            return self.now_ms - (sent_at - timestamp)
        return timestamp


def _is_number(value: object) -> bool:
    """Whether a time was sent as a number (or its digits), not as ISO 8601."""
    if value.__class__ is str:
        return value.strip().lstrip("-").isdigit()
    return True


TOO_EARLY = "Must not be before 1970-01-01T00:00:00Z (after clock-skew correction)."
LOOKS_LIKE_SECONDS = (
    "Looks like Unix seconds: send Unix milliseconds (seconds x 1000) or an ISO 8601 date-time."
)
TOO_LATE = "Must not be more than 24 hours in the future."
