"""One error body for every API: {"code": ..., "message": ..., "fields": {...}}."""

import logging
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler, set_rollback

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


class ApiError(exceptions.APIException):
    """An API error with a stable code; `fields` names the fields at fault, when any."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "bad_request"
    default_detail = "The request is not valid."

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        fields: dict[str, list[str]] | None = None,
        status_code: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message or self.default_detail, code or self.default_code)
        self.code = code or self.default_code
        self.fields = fields
        self.headers = headers or {}
        if status_code is not None:
            self.status_code = status_code


def error_body(code: str, message: str, fields: dict[str, list[str]] | None = None) -> dict:
    body: dict[str, Any] = {"code": code, "message": message}
    if fields:
        body["fields"] = fields
    return body


def _flatten_fields(detail: Any) -> dict[str, list[str]]:
    if isinstance(detail, dict):
        return {
            key: [str(item) for item in (value if isinstance(value, list) else [value])]
            for key, value in detail.items()
        }
    return {}


def service_unavailable() -> Response:
    response = Response(
        error_body("service_unavailable", "The service is unavailable; retry later."),
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
    )
    response["Retry-After"] = str(settings.INGESTION_RETRY_AFTER_SECONDS)
    return response


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, DEPENDENCY_DOWN):
        # The reason (host, port, driver text) goes to the log only.
        logger.warning("API answered 503: a dependency is down", exc_info=exc)
        set_rollback()
        return service_unavailable()
    if isinstance(exc, ApiError):
        response = Response(
            error_body(exc.code, str(exc.detail), exc.fields), status=exc.status_code
        )
        for name, value in exc.headers.items():
            response[name] = value
        return response
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
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        body["message"] = f"Too many requests; retry in {int(exc.wait) + 1} seconds."
    response.data = body
    return response
