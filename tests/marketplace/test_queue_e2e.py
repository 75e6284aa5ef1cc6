"""Marketplace work never delays ingestion: the Procfile's two workers, on a real broker.

A sync that meets `429 Retry-After: 600` waits for its next attempt as a countdown on the
marketplace queue, holding no worker; an identify sent meanwhile is applied at once by the
ingestion worker.
"""

import os
import shlex
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from config.celery import app
from engagement.models import User
from marketplace.fake import FakeMarketplace
from marketplace.models import SyncRun
from tests.conftest import make_tenant
from tests.marketplace.conftest import EMAIL, TOKEN, VENDOR_ID, connect
from tests.processes import database_url

ROOT = Path(__file__).resolve().parents[2]


def test_marketplace_tasks_have_their_own_queue_and_ingestion_keeps_the_default():
    def queue(task: str) -> str:
        return app.amqp.router.route({}, task)["queue"].name

    assert queue("marketplace.tasks.sync_run_execute") == "marketplace"
    assert queue("marketplace.tasks.connection_sync_scheduled") == "marketplace"
    assert queue("marketplace.tasks.sync_runs_close_dead") == "marketplace"
    assert queue("ingestion.tasks.drain_accepted_requests") == "celery"
    assert queue("engagement.tasks.scores_refresh_due") == "celery"


def procfile_command(name: str) -> list[str]:
    """The Procfile's command line for this process, run with this interpreter."""
    line = next(
        line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith(f"{name}:")
    )
    words = shlex.split(line.partition(":")[2])
    assert words[0] == "celery"
    return [sys.executable, "-m", "celery", *words[1:]]


def wait_for(predicate, timeout: float = 30.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"not true after {timeout} s")


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_an_identify_is_applied_while_a_sync_waits_out_a_long_retry_after(post_json):
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.flushdb()
    fake = FakeMarketplace(licenses=120, email=EMAIL, token=TOKEN, vendor_id=VENDOR_ID)
    base_url = fake.start()
    fake.inject(429, retry_after=600, endpoint="transactions")  # the first list a run reads
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": database_url(db),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "MARKETPLACE_API_URL": base_url,
    }
    workers = [
        subprocess.Popen(  # noqa: S603
            procfile_command(name),
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for name in ("worker", "marketplace")
    ]
    try:
        acme = make_tenant("Acme")
        settings.MARKETPLACE_API_URL = base_url
        marketplace_connection = connect(acme)
        run = SyncRun.objects.get(connection=marketplace_connection)
        # Includes both workers' start, which on a box busy with the rest of the suite (make
        # test runs it on every core) can take well over the 30 s the other waits allow.
        wait_for(
            lambda: SyncRun.objects.get(id=run.id).outcome == SyncRun.Outcome.RETRYING,
            timeout=120,
        )
        run.refresh_from_db()
        # Retry-After: 600 is waited 300 s, the most the service waits.
        assert run.retry_at > timezone.now() + timedelta(seconds=290)
        assert "429" in run.error

        sent = time.monotonic()
        response = post_json(
            "/v2/identify", {"userId": "ann", "traits": {"plan": "pro"}}, auth=acme.basic
        )
        assert response.status_code == 202
        wait_for(lambda: User.objects.filter(product=acme.product, tracking_id="ann").exists())
        assert time.monotonic() - sent < 10
        assert User.objects.get(product=acme.product, tracking_id="ann").traits == {"plan": "pro"}

        # The sync still waits its turn, as a countdown: one request so far, nobody slept on it.
        assert SyncRun.objects.get(id=run.id).outcome == SyncRun.Outcome.RETRYING
        assert sum("/sales/transactions" in target for target in fake.requests) == 1
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=20)
        fake.stop()
        broker.flushdb()
