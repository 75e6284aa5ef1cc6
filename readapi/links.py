"""The read API's links (`_links`), built from its route names (readapi/urls.py), never spelt out:
a route that moves, or a service mounted under a path prefix (SCRIPT_NAME), moves its links too.

`reverse()` takes about 10 microseconds and a page of 100 records carries hundreds of links, so
each route is reversed once per script prefix, around a stand-in id, and the prefix is read once
per response; a link is then the parts around the id joined with the record's own.
"""

from __future__ import annotations

from django.urls import NoReverseMatch, get_script_prefix, reverse

# An id no route holds in its own text: reversed in its place, then replaced by each record's id.
_STAND_IN = "918273645"
# (route name, script prefix) -> the path before the id and after it ("" when there is no id).
_PARTS: dict[tuple[str, str], tuple[str, str]] = {}
_MAX_PARTS = 512


def _parts(route: str, script_prefix: str) -> tuple[str, str]:
    parts = _PARTS.get((route, script_prefix))
    if parts is None:
        try:
            head, _, tail = reverse(route, args=[int(_STAND_IN)]).partition(_STAND_IN)
        except NoReverseMatch:  # a route without an id (a list)
            head, tail = reverse(route), ""
        if len(_PARTS) >= _MAX_PARTS:  # a server that sets many prefixes: never grow unbounded
            _PARTS.clear()
        parts = _PARTS[(route, script_prefix)] = (head, tail)
    return parts


class Links:
    """The links of one response: `base` is its scheme and host (no path); the script prefix is
    the one this request is served under."""

    __slots__ = ("base", "script_prefix")

    def __init__(self, base: str = "") -> None:
        self.base = base
        self.script_prefix = get_script_prefix()

    def path(self, route: str, ident: int | None = None, **query: int | None) -> str:
        """The path of the route named `route`, for the record `ident` when the route takes
        one, with the query's ids (`workspace_id=`, ...) that are given."""
        head, tail = _parts(route, self.script_prefix)
        path = head if ident is None else f"{head}{int(ident)}{tail}"
        pairs = "&".join(f"{name}={int(value)}" for name, value in query.items() if value)
        return f"{path}?{pairs}" if pairs else path

    def url(self, route: str, ident: int | None = None, **query: int | None) -> str:
        return f"{self.base}{self.path(route, ident, **query)}"
