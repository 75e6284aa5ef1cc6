"""Django's 400, 403, 404 and 500 answers: the API's one error body for API paths, the
dashboard's styled pages (dashboard/errors.py) for every other path."""

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, JsonResponse

from config.exceptions import error_body
from dashboard import errors as pages

_API_PREFIXES = ("/v1/", "/v2/", "/segment", "/api/")


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith(_API_PREFIXES)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if isinstance(exception, DisallowedHost):
        message = "The Host header names a host this service does not serve."
    else:
        message = "The request is not valid HTTP for this service."
    if is_api(request):
        return JsonResponse(error_body("bad_request", message), status=400)
    return pages.bad_request(request, message)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return JsonResponse(error_body("permission_denied", "You may not do this."), status=403)
    return pages.permission_denied(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return JsonResponse(
            error_body("not_found", f"There is no endpoint at {request.path}."), status=404
        )
    return pages.not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return JsonResponse(
            error_body("server_error", "Something went wrong on our side; retry later."),
            status=500,
        )
    return pages.server_error(request)
