"""Django's 400, 403, 404 and 500 answers: the API's one error body for API paths, the
dashboard's styled pages (dashboard/errors.py) for every other path."""

import re

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, JsonResponse

from config.api_errors import ApiError
from config.exceptions import error_response
from dashboard import errors as pages

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


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if isinstance(exception, DisallowedHost):
        message = "The Host header names a host this service does not serve."
    else:
        message = "The request is not valid HTTP for this service."
    if is_api(request):
        return _api_answer(400, "bad_request", message)
    return pages.bad_request(request, message)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return _api_answer(403, "permission_denied", "You may not do this.")
    return pages.permission_denied(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return _api_answer(404, "not_found", f"There is no endpoint at {request.path}.")
    return pages.not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return _api_answer(500, "server_error", "Something went wrong on our side; retry later.")
    return pages.server_error(request)
