"""Stored JSON as reads render it, whatever a JSON column holds.

Django decodes a JSONField with a recursive json.loads, which fails on a value nested some hundreds
of levels deep (RecursionError at the caller's stack depth), and a few stored values cannot be
written back out as JSON. So reads select traits (and a workspace's account filter, a segment's
conditions) as text and decode them here, bounded. The stored data is never changed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast

if TYPE_CHECKING:
    from engagement.models import Account, Segment, User, Workspace

# Levels of objects and arrays rendered as they are, counting the traits object itself as level 1:
# twice the 32 levels ingestion accepts, so whatever it accepts reads back unchanged. A value
# nested deeper is rendered as its JSON text, a string.
READ_MAX_DEPTH = 64

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
# It matches at any position (perhaps nothing), so its match is never None.
_whitespace_at = cast(Callable[[str, int], "re.Match[str]"], _WHITESPACE.match)
_STRUCTURE = re.compile(r'["\[\]{}]')
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")
# A \\uD800-\\uDFFF escape: half of a pair (SQLite keeps the text as written, escapes included),
# or a lone surrogate, which no JSON output can carry.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _readable_float(text: str) -> float | str:
    """A JSON decimal as a float, or its text when it is beyond a double (1e400)."""
    value = float(text)
    return text if math.isinf(value) else value


def _readable_int(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits())
        return text


# The usual decoder, but a decimal beyond a double reads as its text, not as infinity (which is
# not JSON; nor are NaN and Infinity, read as their text), and control characters in strings are
# read as they are.
_DECODER = json.JSONDecoder(parse_float=_readable_float, parse_constant=str, strict=False)


def _readable_string(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _nested_deeper_than(value: object, max_depth: int) -> bool:
    """Whether `value` has objects or arrays nested more than `max_depth` levels (no recursion)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, level = pending.pop()
        if level > max_depth:
            return True
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, dict | list):
                pending.append((child, level + 1))
    return False


def _skip_container(text: str, pos: int) -> int:
    """The end of the object or array starting at `pos`."""
    depth = 0
    while True:
        match = _STRUCTURE.search(text, pos)
        if match is None:
            raise ValueError("unterminated JSON")
        pos = match.end()
        char = match.group()
        if char == '"':
            rest = _STRING_REST.match(text, pos)
            if rest is None:
                raise ValueError("unterminated JSON string")
            pos = rest.end()
        elif char in "[{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return pos


def _bounded_loads(text: str, max_depth: int) -> object:
    """json.loads without recursion, for what it cannot read or what cannot be rendered as read.

    An object or array nested deeper than `max_depth` levels becomes its JSON text; a number
    beyond what Python converts or a double holds, its text; a lone surrogate, U+FFFD.
    """
    # json.decoder has it (the C scanner's or Python's); typeshed leaves it out.
    scanstring = json.decoder.scanstring  # type: ignore[attr-defined]
    root: list = []
    stack: list = [root]  # the containers open around the value being read
    keys: list = [None]  # the key each open object is reading
    value: object
    pos = _whitespace_at(text, 0).end()
    while True:
        char = text[pos : pos + 1]
        if char in ("{", "["):
            if len(stack) > max_depth:
                end = _skip_container(text, pos)
                value, pos = text[pos:end], end
            else:
                pos = _whitespace_at(text, pos + 1).end()
                closing = "}" if char == "{" else "]"
                if text[pos : pos + 1] == closing:
                    value, pos = ({} if char == "{" else []), pos + 1
                else:
                    pos = _open_container(text, pos, char, stack, keys, scanstring)
                    continue
        else:
            value, pos = _read_scalar(text, pos, scanstring)
        # Place the value; close every container it completes.
        value, pos = _place_and_close(text, pos, value, root, stack, keys)
        if stack[-1] is root:
            if _whitespace_at(text, pos).end() != len(text):
                raise ValueError("extra data after JSON")
            return value
        # A comma: the open container's next value (after its key, in an object).
        pos = _whitespace_at(text, pos + 1).end()
        if isinstance(stack[-1], dict):
            keys[-1], pos = _read_key(text, pos, scanstring)


def _open_container(
    text: str, pos: int, char: str, stack: list, keys: list, scanstring: Callable
) -> int:
    """Open the non-empty object or array `char` starts: the position of its first value."""
    stack.append({} if char == "{" else [])
    keys.append(None)
    if char == "{":
        keys[-1], pos = _read_key(text, pos, scanstring)
    return pos


def _read_scalar(text: str, pos: int, scanstring: Callable) -> tuple[object, int]:
    """The string, number, true, false or null at `pos`, and the position after it."""
    char = text[pos : pos + 1]
    if char == '"':
        value, pos = scanstring(text, pos + 1, False)
        value = _readable_string(value)
    elif number := _NUMBER.match(text, pos):
        found = number.group()
        value = _readable_float(found) if number.lastindex else _readable_int(found)
        pos = number.end()
    elif text.startswith("true", pos):
        value, pos = True, pos + 4
    elif text.startswith("false", pos):
        value, pos = False, pos + 5
    elif text.startswith("null", pos):
        value, pos = None, pos + 4
    else:
        raise ValueError(f"unexpected JSON at {pos}")
    return value, pos


def _place_and_close(
    text: str, pos: int, value: object, root: list, stack: list, keys: list
) -> tuple[object, int]:
    """Place `value` (read up to `pos`) in the innermost open container, closing every container
    it completes.

    Stops at the root, with the whole value read (the caller checks nothing follows it), or at the
    comma before an open container's next value, with `pos` on the comma.
    """
    while True:
        container = stack[-1]
        if container is root:
            return value, pos
        if isinstance(container, dict):
            container[keys[-1]] = value
        else:
            container.append(value)
        pos = _whitespace_at(text, pos).end()
        char = text[pos : pos + 1]
        if char == ",":
            return value, pos
        if char != ("}" if isinstance(container, dict) else "]"):
            raise ValueError(f"unexpected JSON at {pos}")
        pos += 1
        value = stack.pop()
        keys.pop()


def _read_key(text: str, pos: int, scanstring: Callable) -> tuple[str, int]:
    """An object key at `pos` and the position of its value (after the colon)."""
    if text[pos : pos + 1] != '"':
        raise ValueError(f"expected a key at {pos}")
    key, pos = scanstring(text, pos + 1, False)
    pos = _whitespace_at(text, pos).end()
    if text[pos : pos + 1] != ":":
        raise ValueError(f"expected ':' at {pos}")
    return _readable_string(key), _whitespace_at(text, pos + 1).end()


def json_for_reading(text: str | None, *, max_depth: int = READ_MAX_DEPTH) -> object:
    """Stored JSON text as a read renders it (see READ_MAX_DEPTH and _bounded_loads).

    The usual case is one json.loads: the nesting check only walks values with more than
    `max_depth` brackets in their text, and the careful reader runs only for what needs it.
    """
    if text is None:
        return None
    try:
        value = _DECODER.decode(text)
    except (RecursionError, ValueError):
        return _bounded_text(text, max_depth)
    if (
        text.count("{") + text.count("[") > max_depth
        and isinstance(value, dict | list)
        and _nested_deeper_than(value, max_depth)
    ) or ("\\u" in text and _SURROGATE_ESCAPE.search(text)):
        return _bounded_text(text, max_depth)
    return value


def _bounded_text(text: str, max_depth: int) -> object:
    try:
        return _bounded_loads(text, max_depth)
    except ValueError:  # not JSON at all (no column check allows it): the text itself
        return text


# --- JSON columns as reads select them ---------------------------------------------------------

_NOT_SELECTED = object()
# The JSON columns reads select as text (never decoded by Django), each as `<column>_json`.
_JSON_SUFFIX = "_json"


def with_json_as_text(queryset: QuerySet, *fields: str) -> QuerySet:
    """Load these JSON fields of a read as text instead of decoded: `traits` as `traits_json`."""
    return queryset.defer(*fields).annotate(
        **{f"{field}{_JSON_SUFFIX}": Cast(field, TextField()) for field in fields}
    )


def _read_json(record: object, field: str) -> object:
    """A JSON field as reads render it: from its text when a read selector selected it as text,
    else as loaded (decoded already)."""
    text: Any = getattr(record, f"{field}{_JSON_SUFFIX}", _NOT_SELECTED)
    if text is _NOT_SELECTED:
        return getattr(record, field)
    return json_for_reading(text)


def read_traits(subject: Account | User) -> dict:
    """The traits of an account or user as reads render them ({} if not an object)."""
    traits = _read_json(subject, "traits")
    return traits if isinstance(traits, dict) else {}


def read_account_filter(workspace: Workspace) -> dict:
    """A workspace's account filter as reads use it ({} if not an object)."""
    account_filter = _read_json(workspace, "account_filter")
    return account_filter if isinstance(account_filter, dict) else {}


def read_conditions(segment: Segment) -> list[dict]:
    """A segment's conditions as the read API renders them: its objects ([] if not a list)."""
    conditions = _read_json(segment, "conditions")
    if not isinstance(conditions, list):
        return []
    return [condition for condition in conditions if isinstance(condition, dict)]
