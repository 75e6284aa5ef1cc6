"""Celery tasks of ingestion: each calls a service."""

import logging

from celery import shared_task
from django.conf import settings

from ingestion import services

logger = logging.getLogger(__name__)

_DRAIN_SECONDS = 20.0


@shared_task(acks_late=True, ignore_result=True)
def drain_accepted_requests() -> int:
    """Apply what is in the acceptance store; hand the rest on to a fresh task if time runs out."""
    result, more = services.accepted_requests_drain_for(
        seconds=_DRAIN_SECONDS, batch=settings.INGESTION_DRAIN_BATCH
    )
    if more:
        drain_accepted_requests.apply_async()
    return result.requests


@shared_task(ignore_result=True)
def sweep_accepted_requests() -> int:
    """Periodic: apply whatever a lost broker message or a killed worker left behind."""
    result, more = services.accepted_requests_drain_for(
        seconds=_DRAIN_SECONDS, batch=settings.INGESTION_DRAIN_BATCH
    )
    if result.requests:
        logger.info(
            "sweep applied %s accepted requests (%s dropped)", result.requests, result.dropped
        )
    if more:
        drain_accepted_requests.apply_async()
    return result.requests


@shared_task(ignore_result=True)
def purge_old_drops() -> int:
    return services.drops_purge(older_than_days=settings.INGESTION_DROP_RETENTION_DAYS)


@shared_task(ignore_result=True)
def purge_seen_messages() -> int:
    """Periodic: forget messageIds older than the dedup window."""
    return services.seen_messages_purge(older_than_days=settings.INGESTION_DEDUP_DAYS)
