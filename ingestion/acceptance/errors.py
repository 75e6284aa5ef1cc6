"""Errors the acceptance rules answer with, as data: a status, a code, a sentence, the fields."""

from __future__ import annotations


class RequestError(Exception):
    """A request the service answers with an error; `fields` names the fields at fault."""

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
        """The one error body of the service: {"code", "message", "fields"?}."""
        body: dict = {"code": self.code, "message": self.message}
        if self.fields:
            body["fields"] = self.fields
        return body

    def summary(self) -> str:
        """One line naming every field at fault, for the record of a dropped batch item."""
        if not self.fields:
            return self.message
        return "; ".join(f"{name}: {' '.join(problems)}" for name, problems in self.fields.items())


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
