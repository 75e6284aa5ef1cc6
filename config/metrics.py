"""Prometheus metrics: GET /metrics, the HTTP request counter (of the ingestion door and of
Django), and the middleware that counts Django's requests.

Every process (web workers, celery workers) writes its counters and histograms to files in
PROMETHEUS_MULTIPROC_DIR (settings.py points it under DATA_DIR by default); a scrape sums them
with prometheus_client's MultiProcessCollector and adds the gauges each app reads from the
database at that moment (backlog, scores' age, erasures, marketplace connections).
"""

from __future__ import annotations

import asyncio
import hmac
from collections import deque
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from config.api_errors import error_body

HTTP_REQUESTS = Counter(
    "eds_http_requests_total",
    "HTTP requests answered, by door (asgi: the ingestion front door; django: everything else), "
    "endpoint (the URL's name) and status code.",
    ["door", "endpoint", "status"],
)
_request_counters: dict[tuple[str, str, int], Callable[[float], None]] = {}


def http_request_count(door: str, endpoint: str, status: int, count: int = 1) -> None:
    """Count answered requests. The labelled child is looked up once per combination: a count
    costs a dictionary read and one increment of the counter's file."""
    key = (door, endpoint, status)
    increment = _request_counters.get(key)
    if increment is None:
        increment = _request_counters[key] = HTTP_REQUESTS.labels(door, endpoint, str(status)).inc
    increment(count)


# How long the ingestion door's answers may wait, counted in the process, before they reach the
# counter's file (a fraction of any scrape interval).
DOOR_COUNTS_FLUSH_SECONDS = 1.0


class _DoorAnswerCounts:
    """The ingestion door's answers, queued in the process and added to the counter's file once
    a second: an increment of a multiprocess counter (a lock and a write to its memory-mapped
    file) cost the door about 1.2 µs of its 10-15 µs a request, queuing a count a tenth of it.

    Written by a timer on the event loop that counted them, by a scrape of this process before
    it reads the files, and when the server stops (the door's lifespan); a process killed
    outright loses the last second's counts. Without a running loop (a test drives the door's
    coroutine directly) a count is written at once. The deque's append and popleft are atomic,
    so a scrape's thread and the loop's timer may flush together: each answer is counted once.
    Any flush lets the next count start a timer: at worst two run, never none while counts wait
    on a live loop. (A loop closed with its timer pending, as `asyncio.run` closes one, leaves
    its counts to the next scrape or flush.)"""

    def __init__(self) -> None:
        self._answers: deque[tuple[str, int]] = deque()
        self._timer_due = False

    def add(self, endpoint: str, status: int) -> None:
        self._answers.append((endpoint, status))
        if self._timer_due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._timer_due = True
        loop.call_later(DOOR_COUNTS_FLUSH_SECONDS, self.flush)

    def flush(self) -> None:
        self._timer_due = False
        counts: dict[tuple[str, int], int] = {}
        answers = self._answers
        while True:
            try:
                answer = answers.popleft()
            except IndexError:
                break
            counts[answer] = counts.get(answer, 0) + 1
        for (endpoint, status), count in counts.items():
            http_request_count("asgi", endpoint, status, count)


_door_answers = _DoorAnswerCounts()


# Count one answer of the ingestion door, by endpoint and status (written within
# DOOR_COUNTS_FLUSH_SECONDS): the queue's own method, one call less on the door's path.
door_answer_count: Callable[[str, int], None] = _door_answers.add


def door_answer_counts_flush() -> None:
    """Write this process's pending counts of the door's answers now."""
    _door_answers.flush()


class RequestMetricsMiddleware:
    """Counts each request Django answers under its URL's name (bounded, unlike paths);
    requests no URL matched (404s, static files) share one label."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        endpoint = match.view_name if match is not None else "unmatched"
        http_request_count("django", endpoint, response.status_code)
        return response


def scrape_registry() -> CollectorRegistry:
    """A registry for one scrape: every process's counters, then the gauges read now."""
    from engagement.metrics import ErasuresCollector, ScoresAgeCollector
    from ingestion.metrics import BacklogCollector
    from marketplace.metrics import ConnectionCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    registry.register(BacklogCollector())
    registry.register(ScoresAgeCollector())
    registry.register(ErasuresCollector())
    registry.register(ConnectionCollector())
    return registry


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text format, to a scraper holding METRICS_TOKEN as a bearer token."""
    token = settings.METRICS_TOKEN
    if not token:  # disabled: as if there were no such endpoint
        return JsonResponse(
            error_body("not_found", f"There is no endpoint at {request.path}."), status=404
        )
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        response = JsonResponse(
            error_body("not_authenticated", "Send METRICS_TOKEN as a bearer token."), status=401
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        return JsonResponse(
            error_body("permission_denied", "This token does not open the metrics."), status=403
        )
    door_answer_counts_flush()
    return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)
