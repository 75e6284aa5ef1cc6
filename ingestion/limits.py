"""The limits the acceptance rules apply, read from settings (INGESTION_MAX_BODY_BYTES and the
rest) once per process: the door asks for them on every request, and settings change only in
tests, which `setting_changed` tells (the next request reads them again)."""

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from ingestion import acceptance

_limits: list[acceptance.Limits] = []  # the limits, once read


def ingestion_limits() -> acceptance.Limits:
    if not _limits:
        _limits.append(
            acceptance.Limits(
                single=settings.INGESTION_MAX_BODY_BYTES,
                batch=settings.INGESTION_MAX_BATCH_BYTES,
                clock_skew_ms=settings.INGESTION_CLOCK_SKEW_SECONDS * 1000,
            )
        )
    return _limits[0]


@receiver(setting_changed)
def _forget_limits(**kwargs: object) -> None:
    _limits.clear()
