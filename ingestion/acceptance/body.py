"""The body of a request: gunzipped within its limit, read as one JSON object; and the JSON the
store writes for accepted messages."""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from typing import Any

import orjson

from ingestion.acceptance.errors import RequestError, too_large

# A body that only Python's json reads (see `parse_json_object`) may nest at most this deep.
# Python's reader recurses, and how deep it gets depends on how deep the caller's stack already
# is; a bound well below that makes the answer the same however deep the caller is.
MAX_FALLBACK_DEPTH = 512


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
            f"Content-Encoding {encoding[:40]!r} is not supported; send one header, gzip.",
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


# Not frozen (nor Accepted and Outcome, made per request too): a frozen dataclass sets each field
# through object.__setattr__, about three times the cost of building it; nothing assigns to them.
@dataclass(slots=True)
class Reading:
    """A body read as a JSON object. `scan_strings`: whether a string in it may hold what the
    database refuses (NUL, a lone surrogate), so the string rule must look at every string.
    `exact`: read by Python's json, which reads an integer beyond 64 bits as the integer it is
    (orjson reads it as a float; the traits rule asks for an exact reading when it meets one)."""

    data: dict
    scan_strings: bool
    exact: bool


class InexactReading(Exception):
    """A value kept as sent may be an integer orjson read as a float: read the body again with
    `parse_json_object(body, exact=True)`."""


_NUL_ESCAPE = b"\\u0000"


def _reject_constant(name: str) -> None:
    # Python's json reads NaN and Infinity, which are not JSON and which no database stores.
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # A number beyond a double (1e400) would read as infinity, which no database stores either.
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:40]} is beyond the range of a number")
    return value


_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _depth(body: bytes) -> int:
    """How deep the brackets of a JSON text nest, strings left out."""
    depth = deepest = 0
    for match in _TOKENS.finditer(body):
        token = match.group()
        if token in (b"{", b"["):
            depth += 1
            deepest = max(deepest, depth)
        elif token in (b"}", b"]"):
            depth -= 1
    return deepest


def parse_json_object(body: bytes, *, exact: bool = False) -> Reading:
    """The body as a JSON object, or a 400.

    orjson reads it first, several times faster than Python's json, unless `exact` is asked for.
    Python's json reads what orjson refuses: a byte order mark and lone surrogate escapes (the
    string rule then names the field that holds one), and refuses the rest (NaN, Infinity,
    numbers beyond a double)."""
    if not body.strip():
        raise RequestError(400, "invalid_json", "The request body is empty; send a JSON object.")
    try:
        if exact:
            raise orjson.JSONDecodeError("an exact reading is asked for", "", 0)
        data = orjson.loads(body)
        scan_strings = _NUL_ESCAPE in body  # orjson refuses lone surrogates itself
    except orjson.JSONDecodeError:
        if _depth(body) > MAX_FALLBACK_DEPTH:
            raise RequestError(
                400, "invalid_json", "The request body is nested too deeply."
            ) from None
        try:
            data = json.loads(body, parse_constant=_reject_constant, parse_float=_finite_float)
        except (ValueError, UnicodeDecodeError) as exc:
            raise RequestError(400, "invalid_json", "The request body is not valid JSON.") from exc
        except RecursionError as exc:
            raise RequestError(
                400, "invalid_json", "The request body is nested too deeply."
            ) from exc
        scan_strings = exact = True
    if data.__class__ is not dict:
        raise RequestError(400, "invalid_body", "The request body must be a JSON object.")
    return Reading(data, scan_strings, exact)


def messages_json(messages: list[Any]) -> str:
    """The JSON text the store writes for accepted messages: orjson's, ten times faster than
    json.dumps, which stays for the one thing orjson refuses that the rules let in, an integer
    beyond 64 bits in traits (traits nest at most 32 levels, so it never recurses deeply)."""
    try:
        return orjson.dumps(messages).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(messages)


def json_size_bytes(value: object) -> int:
    """UTF-8 bytes of `value` as JSON in orjson's compact form, the form the store writes (a
    character outside ASCII counts as the 2 to 4 bytes it takes, not as one)."""
    try:
        return len(orjson.dumps(value))
    except TypeError:  # an integer beyond 64 bits: json.dumps, in the same compact UTF-8 form
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return len(text.encode("utf-8", "surrogatepass"))
