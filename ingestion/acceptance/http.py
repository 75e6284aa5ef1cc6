"""What the door decides before and around the body: which endpoint a path names, the limits on
headers and the request target, and whether the whole body arrived. The door hands its request
head over as `headers` (lower-case names; a field sent several times joined with ",").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ingestion.acceptance.endpoints import ENDPOINTS
from ingestion.acceptance.errors import RequestError, too_large

# The server (uvicorn with httptools) keeps no limits of its own on the request head: the door
# answers these, with the service's JSON error body (the limits common HTTP servers keep).
MAX_HEADER_LINE = 8190  # bytes of one header field, "name: value"
MAX_HEADER_FIELDS = 100
MAX_TARGET = 4094  # bytes of the path and query


def endpoint_for_path(path: str) -> str | None:
    """The ingestion endpoint a path names: `/<name>` or `/<name>/`, else None."""
    if not path.startswith("/"):
        return None
    name = path[1:-1] if path.endswith("/") else path[1:]
    return name if name in ENDPOINTS else None


# Fields that must come once: HTTP has no way to join two of them (the server lets a repeated one
# through).
_SINGLE_FIELDS = frozenset({"host", "content-type", "content-length"})


def joined_headers(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Header fields by lower-case name, a repeated field's values joined with ","; a 400 for a
    field that must come once."""
    headers: dict[str, str] = {}
    for name, value in pairs:
        name = name.lower()
        if name in headers:
            if name in _SINGLE_FIELDS:
                raise RequestError(400, "invalid_header", f"Send one {name.title()} header.")
            value = f"{headers[name]},{value}"
        headers[name] = value
    return headers


def check_head(headers: Mapping[str, str], target_length: int, body_limit: int) -> None:
    """431 for header fields too many or too large, 414 for a request target too long, 413 for
    a declared body past the limit (refused unread)."""
    if len(headers) > MAX_HEADER_FIELDS:
        raise RequestError(
            431,
            "request_header_fields_too_large",
            f"Send at most {MAX_HEADER_FIELDS} header fields.",
        )
    for name, value in headers.items():
        if len(name) + 2 + len(value) > MAX_HEADER_LINE:
            raise RequestError(
                431,
                "request_header_fields_too_large",
                f"The header {name[:40]!r} is longer than {MAX_HEADER_LINE} bytes.",
            )
    if target_length > MAX_TARGET:
        raise RequestError(
            414, "uri_too_long", f"The request target is longer than {MAX_TARGET} bytes."
        )
    declared = declared_length(headers)
    if declared is not None and declared > body_limit:
        raise too_large(body_limit)


def declared_length(headers: Mapping[str, str]) -> int | None:
    """The Content-Length sent, or None (none, or chunked: the server checked its framing)."""
    value = headers.get("content-length")
    if value is None or not value.isdigit():
        return None
    return int(value)


def incomplete() -> RequestError:
    """A body that did not arrive whole: never stored, never a 2xx (the client has usually gone
    and sees nothing; when it retries, the request counts once)."""
    return RequestError(
        400, "incomplete_body", "The request body ended before all of it arrived; send it again."
    )
