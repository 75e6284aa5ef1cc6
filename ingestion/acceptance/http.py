"""What the door decides before and around the body: which endpoint a path names, the limits on
headers and the request target, and whether the whole body arrived. The door reads its request
head once, with `read_head`, into a `Head`: its fields by lower-case name (a field sent several
times joined with ","), still bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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
_SINGLE_FIELDS = frozenset({b"host", b"content-type", b"content-length"})


class Head(dict[bytes, bytes]):
    """A request's header fields, as sent: values by lower-case name (a field sent several times
    joined with ","), both still bytes, since the door reads only a few of them (`value`
    decodes one)."""

    __slots__ = ()

    def value(self, name: bytes) -> str | None:
        """The field `name` (lower-case), decoded as HTTP's latin-1, or None when not sent."""
        raw = self.get(name)
        return None if raw is None else raw.decode("latin-1")


def read_head(raw_headers: Iterable[tuple[bytes, bytes]]) -> Head:
    """The ASGI header pairs by lower-case name, a repeated field's values joined with ","; a
    400 for a field that must come once, a 431 for a field line ("name: value", after joining)
    longer than MAX_HEADER_LINE.

    The usual head (lower-case names, as uvicorn and most servers pass them; no name twice; all
    its lines within one line's limit together) is taken whole, in C; any other goes through
    `_read_head_field_by_field`, which measures each line. Both answer for every method: a
    head that cannot be read as one is refused before anything else."""
    # ASGI allows any iterable; servers pass a list.
    pairs = raw_headers if isinstance(raw_headers, list) else list(raw_headers)
    head = Head(pairs)
    names = b"".join(head)
    if (
        len(head) == len(pairs)
        and names.islower()
        # Each line is "name: value": the sum of them all bounds the longest.
        and len(names) + len(b"".join(head.values())) + 2 * len(head) <= MAX_HEADER_LINE
    ):
        return head
    return _read_head_field_by_field(pairs)


def _read_head_field_by_field(raw_headers: Sequence[tuple[bytes, bytes]]) -> Head:
    head = Head()
    for raw_name, value in raw_headers:
        name = raw_name.lower()  # a field name is an ASCII token
        if name in head:
            if name in _SINGLE_FIELDS:
                field = name.decode("latin-1").title()
                raise RequestError(400, "invalid_header", f"Send one {field} header.")
            value = b"%s,%s" % (head[name], value)
        head[name] = value
    # A joined value only grows, so a line is measured once all are read; the first field (in
    # the order first sent) whose line is too long names the answer.
    for name, value in head.items():
        if len(name) + 2 + len(value) > MAX_HEADER_LINE:
            raise RequestError(
                431,
                "request_header_fields_too_large",
                f"The header {name[:40].decode('latin-1')!r} is longer than "
                f"{MAX_HEADER_LINE} bytes.",
            )
    return head


def check_head(head: Head, target_length: int, body_limit: int) -> None:
    """431 for header fields too many (`read_head` answers one too large), 414 for a request
    target too long, 413 for a declared body past the limit (refused unread)."""
    if len(head) > MAX_HEADER_FIELDS:
        raise RequestError(
            431,
            "request_header_fields_too_large",
            f"Send at most {MAX_HEADER_FIELDS} header fields.",
        )
    if target_length > MAX_TARGET:
        raise RequestError(
            414, "uri_too_long", f"The request target is longer than {MAX_TARGET} bytes."
        )
    declared = declared_length(head)
    if declared is not None and declared > body_limit:
        raise too_large(body_limit)


def declared_length(headers: dict[bytes, bytes]) -> int | None:
    """The Content-Length sent, or None (none, or chunked: the server checked its framing)."""
    value = headers.get(b"content-length")
    if value is None or not value.isdigit():
        return None
    return int(value)
