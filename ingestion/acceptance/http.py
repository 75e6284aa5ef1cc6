"""What the door decides before and around the body: which endpoint a path names, the limits on
headers and the request target, and whether the whole body arrived. The door reads its request
head once, with `read_head`, into a `Head`: its fields by lower-case name (a field sent several
times joined with ","), and the size of its longest field line.
"""

from __future__ import annotations

from collections.abc import Iterable

from ingestion.acceptance.endpoints import ENDPOINTS
from ingestion.acceptance.errors import RequestError, too_large

# The server (uvicorn with httptools) keeps no limits of its own on the request head: the door
# answers these, with the service's JSON error body (the limits common HTTP servers keep).
MAX_HEADER_LINE = 8190  # bytes of one header field, "name: value"
MAX_HEADER_FIELDS = 100
MAX_TARGET = 4094  # bytes of the path and query


# Every path that names an endpoint, `/<name>` and `/<name>/`: one lookup per request.
_PATHS = {f"/{name}{slash}": name for name in ENDPOINTS for slash in ("", "/")}


def endpoint_for_path(path: str) -> str | None:
    """The ingestion endpoint a path names: `/<name>` or `/<name>/`, else None."""
    return _PATHS.get(path)


# Fields that must come once: HTTP has no way to join two of them (the server lets a repeated one
# through).
_SINGLE_FIELDS = frozenset({"host", "content-type", "content-length"})


class Head:
    """A request's header fields by lower-case name, and the bytes of its longest field line
    ("name: value", after joining), which `check_head` holds to MAX_HEADER_LINE."""

    __slots__ = ("fields", "longest_line")

    def __init__(self, fields: dict[str, str], longest_line: int) -> None:
        self.fields = fields
        self.longest_line = longest_line


def read_head(raw_headers: Iterable[tuple[bytes, bytes]]) -> Head:
    """The ASGI header pairs, read in one pass: decoded (latin-1), by lower-case name, a repeated
    field's values joined with ","; a 400 for a field that must come once."""
    fields: dict[str, str] = {}
    longest = 0
    for raw_name, raw_value in raw_headers:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if name in fields:
            if name in _SINGLE_FIELDS:
                raise RequestError(400, "invalid_header", f"Send one {name.title()} header.")
            value = f"{fields[name]},{value}"
        fields[name] = value
        # A joined value only grows, so the longest line seen on the way is the longest at the
        # end; measured here so that `check_head` need not walk the fields again.
        size = len(name) + len(value)
        if size > longest:
            longest = size
    return Head(fields, longest + 2)  # "name: value"; latin-1: one byte a character


def check_head(head: Head, target_length: int, body_limit: int) -> None:
    """431 for header fields too many or too large, 414 for a request target too long, 413 for
    a declared body past the limit (refused unread)."""
    fields = head.fields
    if len(fields) > MAX_HEADER_FIELDS:
        raise RequestError(
            431,
            "request_header_fields_too_large",
            f"Send at most {MAX_HEADER_FIELDS} header fields.",
        )
    if head.longest_line > MAX_HEADER_LINE:
        # The first field (in the order first sent) whose line is too long names the answer.
        name = next(n for n, v in fields.items() if len(n) + 2 + len(v) > MAX_HEADER_LINE)
        raise RequestError(
            431,
            "request_header_fields_too_large",
            f"The header {name[:40]!r} is longer than {MAX_HEADER_LINE} bytes.",
        )
    if target_length > MAX_TARGET:
        raise RequestError(
            414, "uri_too_long", f"The request target is longer than {MAX_TARGET} bytes."
        )
    declared = declared_length(fields)
    if declared is not None and declared > body_limit:
        raise too_large(body_limit)


def declared_length(headers: dict[str, str]) -> int | None:
    """The Content-Length sent, or None (none, or chunked: the server checked its framing)."""
    value = headers.get("content-length")
    if value is None or not value.isdigit():
        return None
    return int(value)

