"""The rules every value a person types must meet before anything is written: configuration
documents, dashboard and admin forms, automations, trait syncs, allowlists, operator commands.

One definition each, used by every surface, so a value refused in one place is refused in all of
them with the same words. A fault is a text; where a value sits inside a document its path is
put in front (`weights.Report_Created: a whole number from 0 to 10`, `segments[0].conditions[2]`:
list positions count from 0, as in the JSON itself).

The bounds are the ones that mean something and that both databases store: whole numbers below
2**31 (PostgreSQL's integer), days below 3,651 (ten years, more than any look-back or window),
other numbers finite and within ±10**15 (beyond that a float no longer holds every whole number,
and a date computed from it overflows). Text refuses NUL and lone surrogates, which PostgreSQL's
text and jsonb cannot hold, as the ingestion door does for identifiers.
"""

from __future__ import annotations

import json
import math
import re
from numbers import Real
from typing import TypeGuard

from django.utils.dateparse import parse_datetime

MAX_WHOLE = 2**31 - 1
MAX_DAYS = 3650
MAX_MAGNITUDE = 10**15
MAX_CONDITIONS = 50
# Levels of objects and arrays a configuration document may nest (the document itself is 1). A
# workspace document needs 5 (document, segments, a segment, conditions, a condition), 7 with a
# group of conditions ({"any": [...]}, engagement/segment_conditions.py).
MAX_DOCUMENT_DEPTH = 16


def text_problem(text: str) -> str | None:
    """Why a string cannot be stored as it is (NUL, a lone surrogate), or None."""
    if "\x00" in text:
        return "must not contain NUL (\\u0000) characters"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (no lone surrogates)"
    return None


def text_fault(
    value: object, *, max_length: int, required: bool = True, what: str = "a text"
) -> str | None:
    """The fault of a typed text: a string, not blank when required, at most `max_length`
    characters, storable; None when it is fine."""
    if not isinstance(value, str):
        return f"{what} of at most {max_length:,} characters"
    if required and not value.strip():
        return f"{what} that is not empty"
    if len(value) > max_length:
        return f"{what} of at most {max_length:,} characters (this one has {len(value):,})"
    return text_problem(value)


def is_whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def whole_fault(value: object, *, least: int = 0, most: int = MAX_WHOLE) -> str | None:
    """The fault of a whole number that must lie in [least, most], or None."""
    if is_whole(value) and least <= value <= most:
        return None
    return f"a whole number from {least:,} to {most:,}"


def days_fault(value: object, *, least: int = 0) -> str | None:
    return whole_fault(value, least=least, most=MAX_DAYS)


_ROW_ID = re.compile(r"[0-9]{1,18}")


def posted_id(value: object) -> int | None:
    """The row id a form posts (a score sync's, a key's), or None when the value cannot be one:
    1 to 18 ASCII digits, so it fits a bigint column ("²".isdigit() is True, and int() reads
    "٣" and " 3 " too). None answers "no such record", never a database error."""
    if isinstance(value, str) and _ROW_ID.fullmatch(value):
        return int(value)
    return None


def is_number(value: object) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def number_fault(value: object) -> str | None:
    """The fault of a number: finite and within ±10**15, or None."""
    if is_number(value) and math.isfinite(value) and abs(value) <= MAX_MAGNITUDE:  # type: ignore[arg-type]
        return None
    return f"a finite number from -{MAX_MAGNITUDE:.0e} to {MAX_MAGNITUDE:.0e}".replace("+", "")


def plain_value_fault(value: object, *, max_length: int = 1000) -> str | None:
    """The fault of a value compared against (a condition's, a filter's): text, a number or
    true/false, never a list or an object; None when it is fine (null is the caller's call)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        return text_fault(value, max_length=max_length, required=False)
    if is_number(value):
        return number_fault(value)
    return "a text, a number or true/false (not a list or an object)"


def at(path: str, fault: str) -> str:
    """A fault with the path of the value it is about in front."""
    return f"{path}: {fault}" if path else fault


def key_path(parent: str, key: object) -> str:
    """The path of `key` inside the object at `parent` (`weights.Report_Created`); a key that is
    not a plain name is shown as JSON (`account_filter."k\\u0000"`)."""
    if isinstance(key, str) and key.replace("_", "").replace("-", "").isalnum():
        shown = key  # a plain name (isalnum is False for "")
    else:
        shown = json.dumps(key, default=repr)
    return f"{parent}.{shown}" if parent else shown


# The years a typed date-time may fall in: stored times are from 1970 on (the ingestion door
# refuses earlier ones), and a year near 9999, which parse_datetime reads, overflows once it is
# moved to UTC or shifted by a day.
EARLIEST_YEAR = 1970
LATEST_YEAR = 2999


def date_time_fault(value: object) -> str | None:
    """The fault of an ISO 8601 date or date-time compared with stored times: one that parses,
    in the years 1970 to 2999; None when it is fine."""
    fault = f"an ISO 8601 date-time from {EARLIEST_YEAR} to {LATEST_YEAR} (2025-01-31T09:00:00Z)"
    if not isinstance(value, str) or len(value) > 64 or text_problem(value):
        return fault
    try:
        parsed = parse_datetime(value)
    except ValueError:  # well formed, but no such time (February 30th, an offset of 99 hours)
        return fault
    if parsed is None or not EARLIEST_YEAR <= parsed.year <= LATEST_YEAR:
        return fault
    return None


class DocumentError(ValueError):
    """A text that is not a JSON document a person may apply; the message says why."""


def _refused_constant(name: str) -> float:
    raise DocumentError(f"{name} is not a JSON value; write a finite number")


def _bounded_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise DocumentError(f"the number {text[:40]} is too large")
    return value


_DOCUMENT_DECODER = json.JSONDecoder(parse_constant=_refused_constant, parse_float=_bounded_float)


def _depth_within(text: str, most: int) -> bool:
    """Whether the brackets of a JSON text nest at most `most` levels (strings skipped)."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > most:
                return False
        elif char in "]}":
            depth -= 1
    return True


def document_load(text: str, *, max_depth: int = MAX_DOCUMENT_DEPTH) -> object:
    """A JSON document a person typed or piped in, or DocumentError: nested at most `max_depth`
    levels, no NaN or Infinity, no number beyond a double."""
    if not _depth_within(text, max_depth):
        raise DocumentError(f"the document nests deeper than {max_depth} levels")
    try:
        return _DOCUMENT_DECODER.decode(text)
    except DocumentError:
        raise
    except (ValueError, RecursionError) as error:
        raise DocumentError(f"not JSON: {error}") from None
