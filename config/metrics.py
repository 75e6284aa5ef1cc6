"""Prometheus metrics: GET /metrics, the HTTP request counter (of the ingestion door and of
Django), and the middleware that counts Django's requests.

Every process (web workers, celery workers) writes its counters and histograms to files in
PROMETHEUS_MULTIPROC_DIR (settings.py points it under DATA_DIR by default); a scrape sums them
with prometheus_client's MultiProcessCollector and adds the gauges each app reads from the
database at that moment (backlog, scores' age, erasures, marketplace connections).
"""

from __future__ import annotations

import hmac
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
_request_counters: dict[tuple[str, str, int], Callable[[], None]] = {}


def http_request_count(door: str, endpoint: str, status: int) -> None:
    """Count one answered request. The labelled child is looked up once per combination: the
    doors pay a dictionary read and one increment."""
    key = (door, endpoint, status)
    increment = _request_counters.get(key)
    if increment is None:
        increment = _request_counters[key] = HTTP_REQUESTS.labels(door, endpoint, str(status)).inc
    increment()


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
    return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)
