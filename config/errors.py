"""Django's 400, 403, 404 and 500 answers: the API's one error body for API paths, the
dashboard's styled pages (dashboard/errors.py) for every other path; and the 503 (with
Retry-After) of every page whose database (or cache, or broker) cannot be reached.

A database restart ends every connection a process holds. Django replaces a request's own
connection when the request starts and ends (request_started/request_finished), but under ASGI
it calls the error handlers on a thread of the event loop's executor, which no request starts or
ends: a connection opened there was never handed back to the pool, never checked, and after a
restart every signed-in 404 failed on it until the process was restarted. The handlers that read
the database (the 400, 403 and 404 pages, for the visitor and their workspace) therefore manage
their connections as a request does (`_as_a_request`)."""

import logging
import re
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.exceptions import DisallowedHost
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.urls import reverse

from config.api_errors import ApiError, service_unavailable
from config.exceptions import DEPENDENCY_DOWN, error_response
from dashboard import errors as pages

logger = logging.getLogger(__name__)

# The first segment of an API path. Clients and proxies send `//v2/...` and `/V2/...` too; those
# are not endpoints, but the answer is the API's JSON body, not the dashboard's HTML page.
_API_SEGMENTS = frozenset({"v1", "v2", "segment", "api"})
_SLASHES = re.compile(r"/+")


def is_api_path(path: str) -> bool:
    """Whether `path` is an API path: its first segment, after collapsing repeated slashes and
    ignoring case, is v1, v2, segment or api (docs/read-api.md, "Errors")."""
    first = _SLASHES.sub("/", path).lstrip("/").split("/", 1)[0]
    return first.lower() in _API_SEGMENTS


def is_api(request: HttpRequest) -> bool:
    return is_api_path(request.path)


def _api_answer(status: int, code: str, message: str) -> HttpResponse:
    return error_response(ApiError(status, code, message), response_class=JsonResponse)


def _release_connections() -> None:
    """What request_started and request_finished do to a request's connections: one that met an
    error and no longer works, or that outlived CONN_MAX_AGE (with the pool: every one), is
    closed, so a pooled connection goes back to the pool, which checks it before lending it
    again. A connection inside a transaction is someone else's (a test's) and left alone."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()


def service_unavailable_answer(request: HttpRequest) -> HttpResponse:
    """The 503 with Retry-After while a dependency is down: the API's one body on API paths, a
    page in the dashboard's look elsewhere, rendered (like the 500 page) without the request, so
    it reads neither the session nor the database."""
    error = service_unavailable()
    if is_api(request):
        return error_response(error, response_class=JsonResponse)
    template = loader.get_template("dashboard/503.html")
    response = HttpResponse(
        template.render({"home_url": reverse("dashboard:home")}), status=error.status
    )
    response["Retry-After"] = str(error.retry_after)
    return response


def _as_a_request(handler: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Run an error handler that reads the database as Django runs a request: a connection that
    does not work is replaced first and every connection is released afterwards. A connection
    that fails anyway (dropped since it was checked) is replaced once more; if the database is
    still out of reach, the answer is the 503 with Retry-After, not a 500."""

    @wraps(handler)
    def answer(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        _release_connections()
        try:
            try:
                return handler(request, *args, **kwargs)
            except DEPENDENCY_DOWN:
                _release_connections()
                return handler(request, *args, **kwargs)
        except DEPENDENCY_DOWN:
            logger.warning("Error page answered 503: a dependency is down", exc_info=True)
            return service_unavailable_answer(request)
        finally:
            _release_connections()

    return answer


class DependencyDownMiddleware:
    """A page or endpoint that fails because the database, the cache or the broker cannot be
    reached answers 503 with Retry-After: the request was fine and may succeed later. (DRF's
    views already answer so through config.exceptions; this covers every other view.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DEPENDENCY_DOWN):
            return None
        # The reason (host, port, driver text) goes to the log only.
        logger.warning("Answered 503: a dependency is down", exc_info=exception)
        return service_unavailable_answer(request)


@_as_a_request
def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if isinstance(exception, DisallowedHost):
        message = "The Host header names a host this service does not serve."
    else:
        message = "The request is not valid HTTP for this service."
    if is_api(request):
        return _api_answer(400, "bad_request", message)
    return pages.bad_request(request, message)


@_as_a_request
def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return _api_answer(403, "permission_denied", "You may not do this.")
    return pages.permission_denied(request, exception)


@_as_a_request
def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return _api_answer(404, "not_found", f"There is no endpoint at {request.path}.")
    return pages.not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return _api_answer(500, "server_error", "Something went wrong on our side; retry later.")
    return pages.server_error(request)
