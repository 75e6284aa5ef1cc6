"""The production setup as documented: DJANGO_ENV=production, PostgreSQL, RabbitMQ (or Redis),
uvicorn with several workers (the README's web command) and a Celery worker, each a real
process."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from engagement.models import Event
from tests.conftest import make_tenant

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
RABBITMQ_URL = os.environ.get("TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def production_env(broker_url: str, tmp_path: Path) -> dict:
    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        DJANGO_ENV="production",
        SECRET_KEY="test-only-" + "x" * 40,
        FIELD_ENCRYPTION_SALT="test-only-salt",
        ALLOWED_HOSTS="127.0.0.1",
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        CELERY_BROKER_URL=broker_url,
        STATIC_ROOT=str(tmp_path / "static"),
    )
    return env


def spawn(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"not true after {timeout} s")


def http(method: str, url: str, body: dict | None = None, headers: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (local)
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.parametrize("broker_url", [RABBITMQ_URL, settings.CELERY_BROKER_URL])
def test_uvicorn_and_a_worker_in_production_mode(broker_url, tmp_path):
    acme = make_tenant("Acme")
    env = production_env(broker_url, tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    web = spawn(
        ["uvicorn", "config.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "3", "--loop", "uvloop", "--http", "httptools"],
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
