"""GET /healthz: is the database reachable, is the broker reachable.

The answer says only "ok" or "down" per dependency: the reason (host, port, driver message) goes
to the log, never to whoever can reach the endpoint. 503 with Retry-After when one is down.
"""

import logging

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse

from config.api_errors import service_unavailable
from config.celery import app as celery_app
from config.exceptions import error_response

logger = logging.getLogger(__name__)


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:  # any failure means "down"; the log says why
        logger.warning("healthz: database down", exc_info=True)
        return False


def _broker_ok() -> bool:
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return True
    except Exception:
        logger.warning("healthz: broker down", exc_info=True)
        return False


def healthz(request: HttpRequest) -> HttpResponse:
    database_ok = _database_ok()
    broker_ok = _broker_ok()
    healthy = database_ok and broker_ok
    report = {
        "status": "ok" if healthy else "unavailable",
        "database": "ok" if database_ok else "down",
        "broker": "ok" if broker_ok else "down",
    }
    if healthy:
        return JsonResponse(report)
    # The service's one 503 (its status and Retry-After), with the report as its body.
    return error_response(service_unavailable(), body=report, response_class=JsonResponse)
