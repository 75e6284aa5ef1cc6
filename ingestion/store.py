"""The durable acceptance store behind every front door: a 202 is sent only after this commits."""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, transaction

from ingestion.core import Accepted, RequestError
from ingestion.models import AcceptedRequest

logger = logging.getLogger(__name__)

_BACKLOG_CHECK_SECONDS = 1.0
_backlog_cache: dict[str, float] = {"checked_at": 0.0, "size": 0.0}


def _unavailable(message: str) -> RequestError:
    return RequestError(
        503, "service_unavailable", message, retry_after=settings.INGESTION_RETRY_AFTER_SECONDS
    )


def backlog_size() -> int:
    """Accepted requests not yet applied (applied ones are deleted); counted once a second."""
    now = time.monotonic()
    if now - _backlog_cache["checked_at"] >= _BACKLOG_CHECK_SECONDS:
        _backlog_cache["size"] = AcceptedRequest.objects.count()
        _backlog_cache["checked_at"] = now
    return int(_backlog_cache["size"])


def kick_worker() -> None:
    """Ask a worker to drain now. Losing this message loses nothing: the sweep drains too."""
    from ingestion.tasks import drain_accepted_requests

    try:
        drain_accepted_requests.apply_async(retry=False)
    except Exception:  # the broker being down must not fail a request that is already stored
        logger.warning("could not reach the broker; the periodic sweep will apply the backlog")


def store_accepted(accepted_requests: list[Accepted], *, received_at: datetime) -> None:
    """Store accepted requests in one write; raise a 503 `RequestError` when that cannot be made
    durable (database unreachable, backlog over INGESTION_BACKLOG_LIMIT)."""
    try:
        if backlog_size() >= settings.INGESTION_BACKLOG_LIMIT:
            raise _unavailable("The service is catching up on a backlog; retry shortly.")
        with transaction.atomic():
            AcceptedRequest.objects.bulk_create(
                [
                    AcceptedRequest(
                        received_at=received_at,
                        endpoint=accepted.endpoint,
                        key_digest=accepted.key_digest,
                        messages=accepted.messages,
                    )
                    for accepted in accepted_requests
                ]
            )
            transaction.on_commit(kick_worker)
    except DatabaseError as exc:
        logger.error("acceptance store unavailable: %s", exc)
        raise _unavailable("The service cannot store requests right now; retry shortly.") from exc
