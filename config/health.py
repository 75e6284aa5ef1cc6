"""GET /healthz: is the database reachable, is the broker reachable."""

from django.db import connection
from django.http import JsonResponse

from config.celery import app as celery_app


def _database_ok() -> tuple[bool, str]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True, "ok"
    except Exception as exc:  # any failure means "down"; say which
        return False, f"{type(exc).__name__}: {exc}"[:200]


def _broker_ok() -> tuple[bool, str]:
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return True, "ok"
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"[:200]


def healthz(request):
    database_ok, database_detail = _database_ok()
    broker_ok, broker_detail = _broker_ok()
    healthy = database_ok and broker_ok
    return JsonResponse(
        {
            "status": "ok" if healthy else "unavailable",
            "database": database_detail,
            "broker": broker_detail,
        },
        status=200 if healthy else 503,
    )
