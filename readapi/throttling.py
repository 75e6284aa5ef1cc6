"""Per-token rate limits for the read API (429 with Retry-After when exceeded)."""

import logging
import time

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from readapi.authentication import TokenPrincipal

logger = logging.getLogger(__name__)


class TokenRateThrottle(BaseThrottle):
    """`READ_API_THROTTLE_RATE` requests per token per window (e.g. "1200/minute").

    A fixed-window counter in the cache: two O(1) cache calls a request. DRF's
    SimpleRateThrottle keeps the timestamp of every request in the window in one cache value, which
    it reads and writes whole on each request, so its cost grows with the rate. The rate is read
    from settings on every request; an empty rate turns throttling off. When the cache is down,
    requests are served rather than failed.
    """

    scope = "read_api"

    def __init__(self) -> None:
        self.retry_after: float | None = None

    def allow_request(self, request, view) -> bool:
        rate = settings.READ_API_THROTTLE_RATE
        if not rate or not isinstance(request.user, TokenPrincipal):
            return True
        # parse_rate reads nothing of its instance, and DRF has no function of the rate alone.
        limit, duration = SimpleRateThrottle.parse_rate(None, rate)  # type: ignore[arg-type]
        assert limit is not None and duration is not None  # it is None for no rate only
        now = time.time()
        window = int(now // duration)
        key = f"throttle:{self.scope}:{request.user.token_id}:{window}"
        try:
            cache.add(key, 0, timeout=duration + 1)
            count = cache.incr(key)
        except Exception:  # the cache is down: serve rather than fail every read
            logger.warning("read API throttle skipped: cache unavailable", exc_info=True)
            return True
        if count > limit:
            self.retry_after = (window + 1) * duration - now
            return False
        return True

    def wait(self) -> float | None:
        return self.retry_after
