"""The read API's exception handler (DRF's EXCEPTION_HANDLER) and the rendering of an `ApiError`:
every error leaves as the one body of config/api_errors.py, a dependency down as its one 503."""

import logging
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse
from kombu.exceptions import OperationalError as BrokerError
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler, set_rollback

from config.api_errors import ApiError, error_body, service_unavailable
from config.openapi import ErrorSerializer

__all__ = ["ApiError", "ErrorSerializer", "api_exception_handler", "error_body", "error_response"]

logger = logging.getLogger(__name__)

try:  # the shared cache (CACHE_URL) and a Redis broker
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    _REDIS_DOWN: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError)
except ImportError:  # pragma: no cover - redis is in requirements.txt
    _REDIS_DOWN = ()

# A dependency that cannot be reached (database, its pool, the cache, the broker): the request
# was fine and may succeed later, so 503 with Retry-After, not a 500 with a traceback.
DEPENDENCY_DOWN: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    BrokerError,
    *_REDIS_DOWN,
)


def error_response(
    error: ApiError, body: dict | None = None, response_class: type[HttpResponse] = Response
) -> HttpResponse:
    """The answer to `error`: its status, its Retry-After when it has one, and its body (an
    endpoint with its own body, as /healthz has, passes it). A DRF view answers a DRF Response
    (its renderer writes the bytes); Django's own handlers pass JsonResponse."""
    response = response_class(error.body() if body is None else body, status=error.status)
    if error.retry_after is not None:
        response["Retry-After"] = str(error.retry_after)
    return response


def _flatten_fields(detail: Any) -> dict[str, list[str]]:
    if isinstance(detail, dict):
        return {
            key: [str(item) for item in (value if isinstance(value, list) else [value])]
            for key, value in detail.items()
        }
    return {}


def api_exception_handler(exc: Exception, context: dict) -> HttpResponse | None:
    if isinstance(exc, DEPENDENCY_DOWN):
        # The reason (host, port, driver text) goes to the log only.
        logger.warning("API answered 503: a dependency is down", exc_info=exc)
        set_rollback()
        return error_response(service_unavailable())
    if isinstance(exc, ApiError):
        return error_response(exc)
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten_fields(exc.detail)
        if fields:
            body = error_body("invalid_parameters", "Some parameters are not valid.", fields)
        else:
            message = exc.detail[0] if isinstance(exc.detail, list) and exc.detail else exc.detail
            body = error_body("invalid_parameters", str(message))
    elif isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else exc.default_code
        body = error_body(str(code), str(exc.detail))
    else:  # pragma: no cover - exception_handler only answers for APIException and Http404
        body = error_body("error", str(exc))
    if isinstance(exc, exceptions.Throttled):
        # Throttled sets `wait` in its __init__; djangorestframework-stubs 3.18.1 leave it out.
        wait = exc.wait  # type: ignore[attr-defined]
        if wait is not None:
            body["message"] = f"Too many requests; retry in {int(wait) + 1} seconds."
    response.data = body
    return response
