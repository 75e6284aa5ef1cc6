"""The production setup as documented: DJANGO_ENV=production, PostgreSQL, RabbitMQ (or Redis),
uvicorn with several workers (the README's web command) and a Celery worker, each a real
process."""

import json
import os
import signal
from pathlib import Path

import pytest
from django.conf import settings

from engagement.models import Event
from tests.conftest import make_tenant
from tests.processes import free_port, http, production_env, spawn, wait_for, web_command

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
RABBITMQ_URL = os.environ.get("TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")


@pytest.mark.parametrize("broker_url", [RABBITMQ_URL, settings.CELERY_BROKER_URL])
def test_uvicorn_and_a_worker_in_production_mode(broker_url, tmp_path):
    acme = make_tenant("Acme")
    env = production_env(broker_url, tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    web = spawn(
        web_command(port, workers=3),
        env,
    )
    worker = spawn(
        ["celery", "-A", "config", "worker", "--concurrency", "2", "--loglevel", "WARNING"], env
    )
    try:
        wait_for(lambda: http("GET", f"{base}/healthz")[0] == 200)
        assert json.loads(http("GET", f"{base}/healthz")[1]) == {
            "status": "ok",
            "database": "ok",
            "broker": "ok",
        }
        for n in range(6):  # spread over the uvicorn workers
            status, body = http(
                "POST",
                f"{base}/v2/track",
                {"userId": f"u{n}", "event": "Report_Created"},
                {"Authorization": acme.basic, "Content-Type": "application/json"},
            )
            assert (status, body) == (202, b"")
        wait_for(lambda: Event.objects.filter(product=acme.product).count() == 6)
        status, _ = http("GET", f"{base}/admin/")
        assert status == 200  # the login page, served with production settings
    finally:
        for process in (worker, web):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=30)
