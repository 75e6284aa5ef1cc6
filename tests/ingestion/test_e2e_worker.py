"""End to end: real HTTP -> durable store -> real broker -> real worker process -> PostgreSQL.

And the safety net: with the broker's messages lost and a worker killed, the periodic sweep
(run by a real beat process) applies every accepted request exactly once.
"""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from engagement.models import Account, AccountScore, Event, User, UserScore
from ingestion.models import AcceptedRequest
from tests.conftest import make_tenant
from tests.processes import database_url

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def post(url: str, body: dict, key: str) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Basic {key}"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (local server)
        assert response.read() == b""
        return response.status


def wait_for(predicate, timeout: float = 30.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"not true after {timeout} s")


def service_env(**extra: str) -> dict:
    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url(db),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        **extra,
    )
    return env


def start(*args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "celery", "-A", "config", *args, "--loglevel", "WARNING"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop(process: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        os.killpg(process.pid, sig)
        process.wait(timeout=20)


@pytest.fixture
def worker_env(live_door, broker):
    return service_env()


def test_http_to_worker_to_postgresql(live_door, worker_env):
    acme = make_tenant("Acme")
    worker = start(
        "worker", "--pool", "solo", "--without-gossip", "--without-mingle", env=worker_env
    )
    try:
        assert (
            post(
                f"{live_door.url}/v2/identify",
                {"userId": "ann", "traits": {"email": "a@x.io"}},
                acme.key.key,
            )
            == 202
        )
        assert (
            post(
                f"{live_door.url}/v2/group",
                {"groupId": "acme", "userId": "ann", "traits": {"plan": "pro"}},
                acme.key.key,
            )
            == 202
        )
        assert (
            post(
                f"{live_door.url}/v2/track",
                {"userId": "ann", "event": "Report_Created"},
                acme.key.key,
            )
            == 202
        )
        assert (
            post(
                f"{live_door.url}/v1/events",
                {"user_id": "ann", "event": "Report_Shared", "api_key": acme.key.key},
                "ignored",
            )
            == 202
        )

        wait_for(lambda: Event.objects.count() == 2 and not AcceptedRequest.objects.exists())
    finally:
        stop(worker)

    ann = User.objects.get(product=acme.product, tracking_id="ann")
    assert ann.traits == {"email": "a@x.io"}
    assert Account.objects.get(product=acme.product, tracking_id="acme").traits == {"plan": "pro"}
    assert sorted(ann.events.values_list("name", "account__tracking_id")) == [
        ("Report_Created", "acme"),
        ("Report_Shared", "acme"),
    ]


def test_a_track_moves_the_scores_within_seconds_with_no_beat_running(live_door, worker_env):
    """The drain queues the refresh (engagement/scoring/demand.py): no beat runs, and the
    sweep's period is an hour."""
    acme = make_tenant("Acme")
    worker_env["SCORING_REFRESH_SECONDS"] = "3600"
    worker = start("worker", "--concurrency", "2", "--without-gossip", env=worker_env)

    def scored() -> tuple[float | None, float | None]:
        user = UserScore.objects.filter(workspace=acme.workspace, user__tracking_id="ann")
        account = AccountScore.objects.filter(workspace=acme.workspace, account__tracking_id="acme")
        return (
            user.values_list("raw_score", flat=True).first(),
            account.values_list("raw_score", flat=True).first(),
        )

    track = {"userId": "ann", "event": "Report_Created", "context": {"groupId": "acme"}}
    try:
        assert post(f"{live_door.url}/v2/group", {"groupId": "acme", "userId": "ann"}, acme.key.key)
        assert post(f"{live_door.url}/v2/track", track, acme.key.key) == 202
        wait_for(lambda: scored() == (1, 1))  # the first refresh: a full rescore
        for expected in (2, 3):
            assert post(f"{live_door.url}/v2/track", track, acme.key.key) == 202
            took = wait_for(lambda n=expected: scored() == (n, n), timeout=10)
            # A drain, the refresh's delay (250 ms) and an incremental refresh, on a busy box.
            assert took < 5, took
    finally:
        stop(worker)


def test_the_sweep_recovers_lost_messages_and_a_killed_worker_without_double_counting(
    live_door, worker_env, broker
):
    acme = make_tenant("Acme")
    sent = 60
    for n in range(sent):
        assert (
            post(f"{live_door.url}/v2/track", {"userId": f"u{n % 5}", "event": "A"}, acme.key.key)
            == 202
        )
    assert AcceptedRequest.objects.count() == sent

    # A worker starts draining and is killed -9 part-way; then the broker loses every message.
    worker = start(
        "worker", "--pool", "solo", "--without-gossip", "--without-mingle", env=worker_env
    )
    time.sleep(1.0)
    stop(worker, signal.SIGKILL)
    broker.flushdb()
    applied_before_recovery = Event.objects.count()
    assert applied_before_recovery + AcceptedRequest.objects.count() == sent

    # Nothing will kick a worker now: only beat's periodic sweep can find the backlog.
    env = service_env(INGESTION_SWEEP_SECONDS="1")
    worker = start("worker", "--pool", "solo", "--without-gossip", "--without-mingle", env=env)
    beat = start("beat", "--schedule", "/tmp/eds-test-beat-schedule", env=env)
    try:
        wait_for(lambda: not AcceptedRequest.objects.exists(), timeout=45)
    finally:
        stop(beat)
        stop(worker)

    assert Event.objects.count() == sent
    assert sum(acme.product.users.values_list("rollups__count", flat=True)) == sent
