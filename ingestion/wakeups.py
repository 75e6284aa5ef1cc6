"""Coalescing the door's wake-ups of the drain: one waiting in the broker is enough.

Every web process wakes a worker (a `drain_accepted_requests` task) at most every
INGESTION_WAKE_UP_MS while it stores requests (ingestion/writer.py). With no worker free to take
them, or none running, those wake-ups pile up in the broker, and each one costs its web process
a Celery publish: 1.4 ms of CPU on a thread that holds the interpreter's lock meanwhile, about a
tenth of the door's own CPU under load (docs/benchmarks.md, "The door and its two yardsticks").

So a process that finds a wake-up already queued and not yet taken sends none: whoever queues
one marks it in the shared cache (`wake_up_claim`), and the worker that takes a wake-up removes
the mark before it drains (`wake_up_taken`). A process that saw the mark did so after its own
requests were committed, so before the worker removed it, so before that worker's drain began:
that drain claims them. The mark lapses after PENDING_SECONDS, so a wake-up the broker lost
delays the next one by that much at most (the periodic sweep drains in any case).

Only where the cache is shared (CACHE_URL): a process's own memory cannot see another process's
mark, so without it every wake-up is sent, as before.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)

PENDING_KEY = "ingestion:drain-wake-up-pending"
PENDING_SECONDS = 1


def wake_up_claim() -> bool:
    """Whether to send a wake-up: True, and marked pending, unless one is pending already."""
    if not settings.CACHE_SHARED:
        return True
    try:
        return bool(cache.add(PENDING_KEY, 1, timeout=PENDING_SECONDS))
    except Exception:  # the cache is down: send it, as without a shared cache
        logger.warning("could not reach the cache; waking a worker regardless", exc_info=True)
        return True


def wake_up_withdrawn() -> None:
    """The wake-up just claimed could not be sent: let the next one go at once."""
    if settings.CACHE_SHARED:
        try:
            cache.delete(PENDING_KEY)
        except Exception:  # it lapses by itself
            logger.warning("could not reach the cache to withdraw a wake-up", exc_info=True)


def wake_up_taken() -> bool:
    """A worker takes a wake-up. True when one was marked pending: a web process may have sent
    none in reliance on it, so this worker must drain, whatever it drained before."""
    if not settings.CACHE_SHARED:
        return False
    try:
        return bool(cache.delete(PENDING_KEY))
    except Exception:  # cannot tell: drain
        logger.warning("could not reach the cache; draining regardless", exc_info=True)
        return True
