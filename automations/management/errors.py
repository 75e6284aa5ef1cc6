"""A service's ValidationError as a command's error: every field and what is wrong with it."""

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError


def command_error(exc: ValidationError) -> CommandError:
    return CommandError(
        "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
    )
