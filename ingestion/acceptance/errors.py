"""Errors the acceptance rules answer with, as data: a status, a code, a sentence, the fields."""

from __future__ import annotations

from config.api_errors import ApiError

# The service's one error type (config/api_errors.py): status, code, message, fields, retry_after;
# `body()` is the one error body. The acceptance rules know it by what it is to them.
RequestError = ApiError


class FieldErrors:
    """Collects what is wrong with a message's fields, so one answer names every field at fault."""

    __slots__ = ("errors",)

    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}

    def add(self, name: str, message: str) -> None:
        self.errors.setdefault(name, []).append(message)

    def raise_if_any(self) -> None:
        if self.errors:
            raise RequestError(
                400, "invalid_fields", "Some fields are missing or not valid.", self.errors
            )


def too_large(limit: int) -> RequestError:
    return RequestError(
        413, "payload_too_large", f"The request body is larger than {limit // 1024} KiB."
    )
