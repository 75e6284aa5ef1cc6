"""`/tracker.js` (the current version, revalidated hourly) and `/tracker-<version>.js` (that
version for good): plain JavaScript read once per process, with an ETag so a browser's copy is
revalidated with a 304."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import condition, require_safe

# Bump with every change to tracker.js: a page pinned to /tracker-<version>.js keeps its copy.
TRACKER_VERSION = "1.0.0"
_SOURCE = Path(__file__).with_name("tracker.js")
_LATEST_MAX_AGE = 3600
_PINNED_MAX_AGE = 365 * 24 * 3600


@cache
def tracker_source() -> bytes:
    return _SOURCE.read_text(encoding="utf-8").replace("__VERSION__", TRACKER_VERSION).encode()


@cache
def _etag() -> str:
    return hashlib.sha256(tracker_source()).hexdigest()[:32]


def _answer(max_age: int, immutable: bool = False) -> HttpResponse:
    response = HttpResponse(tracker_source(), content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = f"public, max-age={max_age}" + (", immutable" if immutable else "")
    # A page on any origin loads it with <script src>; crossorigin="anonymous" needs this.
    response["Access-Control-Allow-Origin"] = "*"
    response["Cross-Origin-Resource-Policy"] = "cross-origin"
    return response


@require_safe
@condition(etag_func=lambda request: _etag())
def tracker_latest(request: HttpRequest) -> HttpResponse:
    return _answer(_LATEST_MAX_AGE)


@require_safe
@condition(etag_func=lambda request: _etag())
def tracker_pinned(request: HttpRequest) -> HttpResponse:
    return _answer(_PINNED_MAX_AGE, immutable=True)
