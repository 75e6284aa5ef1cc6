"""What the door checks of a request's key before it stores anything, beyond the acceptance
rules: the key's origin allowlist (for a browser's request, which names its page's origin) and
the per-key request rate (INGESTION_KEY_RATE_LIMIT, counted in the shared cache so every web
process enforces the same limit).

Both read shared state (the database, the cache), so the door awaits them on a thread; the
in-process test door runs them inline, like its `InlineStore`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections

from config.api_errors import service_unavailable
from config.env import rate_parts
from config.exceptions import DEPENDENCY_DOWN
from ingestion.acceptance import RequestError
from ingestion.models import IngestionKey

# How long a web process trusts its copy of the keys' allowlists: an edit reaches every
# process within this many seconds.
ORIGINS_TTL_SECONDS = 10.0

RunSync = Callable[..., Awaitable[Any]]


async def run_on_thread(function: Callable, *args: Any) -> Any:
    def call() -> Any:
        close_old_connections()  # a connection the database dropped is replaced first
        return function(*args)

    return await sync_to_async(call, thread_sensitive=False)()


async def run_inline(function: Callable, *args: Any) -> Any:
    return function(*args)


def allowlists() -> dict[str, frozenset[str]]:
    """The origin allowlist of every key that has one, by key digest."""
    return {
        digest: frozenset(IngestionKey.origins_from_text(text))
        for digest, text in IngestionKey.objects.exclude(allowed_origins="").values_list(
            "digest", "allowed_origins"
        )
    }


def rate_hit(digest: str, limit: int, window_seconds: int) -> int | None:
    """Count a request under `digest` in the current window of the shared cache; the seconds
    until the window ends when the request is one too many, else None."""
    now = time.time()
    window = int(now // window_seconds)
    counter = f"eds:ingest-rate:{digest}:{window_seconds}:{window}"
    cache.add(counter, 0, timeout=window_seconds + 1)
    try:
        count = cache.incr(counter)
    except ValueError:  # expired between add and incr: this request starts the window again
        cache.set(counter, 1, timeout=window_seconds + 1)
        count = 1
    if count <= limit:
        return None
    return max(1, math.ceil((window + 1) * window_seconds - now))


class KeyChecks:
    """The origin allowlists (a copy per process, ORIGINS_TTL_SECONDS old at most) and the
    rate limit, run through `run_sync`."""

    def __init__(self, run_sync: RunSync = run_on_thread, ttl: float = ORIGINS_TTL_SECONDS):
        self.run_sync = run_sync
        self.ttl = ttl
        self._allowlists: dict[str, frozenset[str]] = {}
        self._expires = 0.0
        self._lock = asyncio.Lock()

    async def check(self, digests: Iterable[str], origin: str | None) -> None:
        """Raise the RequestError to answer (403, 429) for these keys' request, if any; a 503
        when the database or the cache cannot tell."""
        try:
            await self._check(digests, origin)
        except DEPENDENCY_DOWN as down:
            raise service_unavailable() from down

    async def _check(self, digests: Iterable[str], origin: str | None) -> None:
        if origin is not None:
            await self._check_origin(digests, origin)
        if settings.INGESTION_KEY_RATE_LIMIT:
            limit, window = rate_parts(settings.INGESTION_KEY_RATE_LIMIT)
            for digest in set(digests):
                retry_after = await self.run_sync(rate_hit, digest, limit, window)
                if retry_after is not None:
                    raise RequestError(
                        429,
                        "rate_limited",
                        f"This key may send {settings.INGESTION_KEY_RATE_LIMIT} requests; retry "
                        f"after {retry_after} s.",
                        retry_after=retry_after,
                    )

    async def _check_origin(self, digests: Iterable[str], origin: str) -> None:
        if time.monotonic() >= self._expires:
            async with self._lock:
                if time.monotonic() >= self._expires:
                    self._allowlists = await self.run_sync(allowlists)
                    self._expires = time.monotonic() + self.ttl
        for digest in set(digests):
            allowed = self._allowlists.get(digest)
            if allowed is not None and origin.lower() not in allowed:
                raise RequestError(
                    403,
                    "origin_not_allowed",
                    f"This key accepts browser requests only from its allowed origins; "
                    f"{origin[:200]} is not one of them.",
                )
