"""The one error of every API, as data, and the one body it is sent as.

`ApiError(status, code, message, fields?, retry_after?)` is raised by the ingestion acceptance
rules, the read API and the service's own handlers alike; `error_body` is the one place the
body `{"code": ..., "message": ..., "fields": {...}}` is built, and `service_unavailable` the one
503 (with Retry-After) every path answers when a dependency is down.

It lives in config, the one package every app may import, not in engagement: it is about HTTP
answers, and engagement (the core, also run by workers and commands) knows nothing of HTTP. The
module imports nothing of Django but its settings and nothing of DRF: the ingestion acceptance
rules are free of a web framework, and raising an error there costs no more than an exception
with five attributes.
"""

from __future__ import annotations

from django.conf import settings

SERVICE_UNAVAILABLE_MESSAGE = "The service is unavailable; retry later."


def error_body(code: str, message: str, fields: dict[str, list[str]] | None = None) -> dict:
    """The one error body of the service: {"code", "message", "fields"?}; `fields` (each field
    at fault, with what is wrong with it) only when there are any."""
    body: dict = {"code": code, "message": message}
    if fields:
        body["fields"] = fields
    return body


class ApiError(Exception):
    """A request the service answers with an error: its status, a stable code, a sentence, the
    fields at fault (optional) and, for a 503, the seconds after which to retry."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        fields: dict[str, list[str]] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.fields = fields
        self.retry_after = retry_after

    def body(self) -> dict:
        return error_body(self.code, self.message, self.fields)

    def summary(self) -> str:
        """One line naming every field at fault, for the record of a dropped batch item."""
        if not self.fields:
            return self.message
        return "; ".join(f"{name}: {' '.join(problems)}" for name, problems in self.fields.items())


def service_unavailable(message: str = SERVICE_UNAVAILABLE_MESSAGE) -> ApiError:
    """The one 503: a dependency (the database, the cache, the broker) cannot be reached; the
    request was fine and may succeed after INGESTION_RETRY_AFTER_SECONDS (the Retry-After)."""
    return ApiError(
        503, "service_unavailable", message, retry_after=settings.INGESTION_RETRY_AFTER_SECONDS
    )
