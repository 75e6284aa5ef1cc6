"""The limits the acceptance rules apply, read from settings (INGESTION_MAX_BODY_BYTES and the
rest), built once per combination of values: settings change only in tests."""

import functools

from django.conf import settings

from ingestion import acceptance


def ingestion_limits() -> acceptance.Limits:
    return _limits(
        settings.INGESTION_MAX_BODY_BYTES,
        settings.INGESTION_MAX_BATCH_BYTES,
        settings.INGESTION_CLOCK_SKEW_SECONDS,
    )


@functools.lru_cache(maxsize=8)
def _limits(single: int, batch: int, clock_skew_seconds: int) -> acceptance.Limits:
    return acceptance.Limits(single=single, batch=batch, clock_skew_ms=clock_skew_seconds * 1000)
