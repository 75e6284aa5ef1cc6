"""Celery tasks of ingestion: each calls a service."""

import logging
import time

from celery import shared_task
from django.conf import settings

from ingestion import tally
from ingestion.services.dedup import seen_messages_purge
from ingestion.services.drain import DrainResult, accepted_requests_drain_for
from ingestion.services.drops import drops_purge
from ingestion.wakeups import wake_up_taken

logger = logging.getLogger(__name__)

_DRAIN_SECONDS = 20.0

# Per worker process: the wall-clock time the latest drain that caught up (its last batch ended
# short of the limit, see accepted_requests_drain_for) began. Every request committed before
# then was claimed by that drain, or by another worker's (rows it had locked were skipped).
_caught_up_from = float("-inf")


def _drain() -> tuple[DrainResult, bool]:
    """Drain for up to _DRAIN_SECONDS; remember when, if the drain caught up, it began."""
    global _caught_up_from
    began = time.time()
    result, more = accepted_requests_drain_for(
        seconds=_DRAIN_SECONDS, batch=settings.INGESTION_DRAIN_BATCH
    )
    if not more:
        # Assigned, not raised to the larger: a clock stepped back corrects itself at once.
        _caught_up_from = began
    return result, more


def _clock_margin_seconds() -> float:
    """How much earlier than the start of this process's latest drain that caught up a drain task
    must have been queued to be skipped. The task's time is the web machine's clock, the drain's
    the worker's: a margin larger than the skew between them keeps a task queued after that drain
    began from ever being skipped. Were the clocks further apart, such a request would wait for
    the next task or the sweep (INGESTION_SWEEP_SECONDS), never be lost."""
    return settings.INGESTION_HOSTS_CLOCK_SKEW_MS / 1000


def _requeue() -> None:
    drain_accepted_requests.apply_async(kwargs={"queued_at": time.time()})


@shared_task(acks_late=True, ignore_result=True)
def drain_accepted_requests(queued_at: float | None = None) -> int:
    """Apply what is in the acceptance store; hand the rest on to a fresh task if time runs out.

    One task is queued per stored write (ingestion.store.kick_worker), after its commit, with
    `queued_at`, the time it was queued. A task queued (by more than the clock margin) before
    this process began a drain that caught up returns at once, without a query: that drain
    claimed everything the task was queued for. So a worker back from an outage, with a task
    per request waiting for it, drains the backlog in a few transactions, then skips the rest.
    A task without `queued_at` (queued before this argument existed) always drains, and so
    does one that finds the wake-up mark (ingestion.wakeups): a web process may have sent no
    task of its own for requests committed after that drain, relying on this one.
    """
    relied_on = wake_up_taken()
    if (
        not relied_on
        and queued_at is not None
        and queued_at < _caught_up_from - _clock_margin_seconds()
    ):
        return 0
    result, more = _drain()
    if more:
        _requeue()
    return result.requests


@shared_task(ignore_result=True)
def sweep_accepted_requests() -> int:
    """Periodic: apply whatever a lost broker message or a killed worker left behind."""
    result, more = _drain()
    if result.requests:
        logger.info(
            "sweep applied %s accepted requests (%s dropped)", result.requests, result.dropped
        )
    if more:
        _requeue()
    return result.requests


@shared_task(ignore_result=True)
def purge_old_drops() -> int:
    """The drop log and the tally of accepted requests, past INGESTION_DROP_RETENTION_DAYS."""
    days = settings.INGESTION_DROP_RETENTION_DAYS
    tally.accepted_minutes_purge(older_than_days=days)
    return drops_purge(older_than_days=days)


@shared_task(ignore_result=True)
def purge_seen_messages() -> int:
    """Periodic: forget messageIds older than the dedup window."""
    return seen_messages_purge(older_than_days=settings.INGESTION_DEDUP_DAYS)
