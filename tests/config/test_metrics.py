"""GET /metrics: closed without METRICS_TOKEN, refused with a wrong one, and values that move as
requests, drains and refreshes happen, summed over processes.

Every process of the host shares PROMETHEUS_MULTIPROC_DIR, so another test run on the same
machine may add to the same counters meanwhile: the assertions on counters compare the change
across the test with what the test itself caused, as a lower bound where others could add.
"""

import asyncio
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from config.metrics import DOOR_COUNTS_FLUSH_SECONDS
from config.metrics_files import multiprocess_dir_prepare
from ingestion.asgi import IngestionFrontDoor

TOKEN = "scrape-me-please"
ROOT = Path(__file__).resolve().parents[2]

Samples = dict[tuple[str, frozenset], float]


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_TOKEN = TOKEN


def scrape(client) -> Samples:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_the_endpoint_does_not_exist_without_a_token(client, settings, db):
    settings.METRICS_TOKEN = ""
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_a_missing_or_wrong_token_is_refused_with_the_api_error_body(client, metrics_on, db):
    missing = client.get("/metrics")
    assert missing.status_code == 401 and missing.json()["code"] == "not_authenticated"
    assert missing["WWW-Authenticate"].startswith("Bearer")
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me-pleasf")
    assert wrong.status_code == 403 and wrong.json()["code"] == "permission_denied"
    basic = client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}")
    assert basic.status_code == 401


def test_django_requests_drains_and_drops_move_the_counters(
    client, metrics_on, acme, post_json, drain
):
    before = scrape(client)
    tracked = post_json("/v2/track", {"userId": "u1", "event": "A"}, auth=acme.basic)
    assert tracked.status_code == 202
    batch = {"batch": [{"type": "track", "userId": "u2", "event": "B"}] * 3}
    assert post_json("/v1/batch", batch, auth=acme.basic).status_code == 200
    unknown = post_json("/v2/track", {"userId": "u3", "event": "C"}, auth="Basic nobody")
    assert unknown.status_code == 202

    waiting = scrape(client)
    assert value(waiting, "eds_ingestion_requests_waiting") == 3
    assert value(waiting, "eds_ingestion_oldest_waiting_age_seconds") >= 0
    drain()
    after = scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    requests = "eds_http_requests_total"
    assert moved(requests, door="asgi", endpoint="ingest-v2-track", status="202") >= 2
    assert moved(requests, door="asgi", endpoint="ingest-v1-batch", status="200") >= 1
    assert moved("eds_ingestion_messages_applied_total") >= 4
    assert moved("eds_ingestion_messages_dropped_total", reason="unknown_key") >= 1
    assert moved("eds_ingestion_drain_batch_duration_seconds_count") >= 1
    assert value(after, "eds_ingestion_requests_waiting") == 0
    assert value(after, "eds_ingestion_oldest_waiting_age_seconds") == 0


async def _no_fallback(scope, receive, send):
    raise AssertionError("an ingestion POST must stay at the ASGI door")


async def _refused_track(door: IngestionFrontDoor) -> int:
    """POST /v2/track with no key: the door refuses it before anything is stored."""
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v2/track",
        "raw_path": b"/v2/track",
        "query_string": b"",
        "scheme": "http",
        "headers": [
            (b"host", b"testserver"),
            (b"content-type", b"application/json"),
            (b"content-length", b"2"),
        ],
    }
    await door(scope, receive, send)
    return sent[0]["status"]


def _door_labels(status: int) -> dict[str, str]:
    return {"door": "asgi", "endpoint": "ingest-v2-track", "status": str(status)}


def test_the_asgi_door_counts_its_answers(client, metrics_on, db):
    before = scrape(client)
    status = asyncio.run(_refused_track(IngestionFrontDoor(_no_fallback)))
    after = scrape(client)  # a scrape writes this process's waiting counts first

    assert 400 <= status < 500
    requests = "eds_http_requests_total"
    moved = value(after, requests, **_door_labels(status)) - value(
        before, requests, **_door_labels(status)
    )
    assert moved >= 1


def test_the_door_writes_its_counts_within_a_second_without_a_scrape(settings, db):
    """On a running event loop the door queues its counts and a timer writes them to the
    process's file: another process's scrape sees them within DOOR_COUNTS_FLUSH_SECONDS."""

    def on_file(status: int) -> float:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(settings.PROMETHEUS_MULTIPROC_DIR))
        return registry.get_sample_value("eds_http_requests_total", _door_labels(status)) or 0.0

    async def answer_then_wait() -> tuple[int, float]:
        status = await _refused_track(IngestionFrontDoor(_no_fallback))
        before = on_file(status)
        await _refused_track(IngestionFrontDoor(_no_fallback))
        await asyncio.sleep(DOOR_COUNTS_FLUSH_SECONDS + 0.5)
        return status, on_file(status) - before

    status, moved = asyncio.run(answer_then_wait())
    assert 400 <= status < 500
    assert moved >= 1


def test_counts_of_several_processes_add_up(tmp_path):
    """Two processes count into one directory; the collector a scrape uses sums them, also
    after both exited; start-up tidying removes only the files of processes that are gone."""
    directory = tmp_path / "metrics"
    directory.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory), "ENV_FILE": os.devnull}
    env.pop("METRICS_TOKEN", None)
    script = (
        "import django; django.setup();"
        "from config.metrics import http_request_count;"
        "[http_request_count('django', 'healthz', 200) for _ in range(5)]"
    )
    for _ in range(2):
        subprocess.run(
            [sys.executable, "-c", script],
            env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
            cwd=ROOT,
            check=True,
        )

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))
    labels = {"door": "django", "endpoint": "healthz", "status": "200"}
    assert registry.get_sample_value("eds_http_requests_total", labels) == 10

    (directory / f"counter_{os.getpid()}.db").write_bytes(b"")  # a live process's file
    multiprocess_dir_prepare(directory)
    assert [path.name for path in directory.iterdir()] == [f"counter_{os.getpid()}.db"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _status_of(port: int, path: str, method: str = "GET", body: bytes | None = None) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body)
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.e2e
def test_two_uvicorn_workers_count_into_one_sum_across_a_worker_restart(tmp_path):
    """uvicorn --workers 2 as production runs it: two workers' counts add up, a worker that is
    killed and replaced keeps its counts in the sum, the door's answers of the last second are
    written when the server stops, and a new run of the server removes the files of the
    previous run's workers (none of them runs any more)."""
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "ENV_FILE": os.devnull,
        "DJANGO_ENV": "embedded",
        "DATABASE_URL": "",
        "CELERY_BROKER_URL": "",
        "DATA_DIR": str(tmp_path),
        "PROMETHEUS_MULTIPROC_DIR": "",
    }
    directory = tmp_path / "metrics"
    directory.mkdir()
    previous_run = directory / "counter_999999999.db"  # a pid no process has
    previous_run.write_bytes(b"")
    server = subprocess.Popen(
        [str(ROOT / ".venv/bin/uvicorn"), "config.asgi:application", "--workers", "2",
         "--host", "127.0.0.1", "--port", str(port), "--no-access-log"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def worker_pids() -> set[int]:
        return {int(path.stem.rpartition("_")[2]) for path in directory.glob("counter_*.db")}

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                _status_of(port, "/no-such-page")
                break
            except OSError:
                assert time.monotonic() < deadline, "uvicorn did not start"
                time.sleep(0.2)
        statuses = [_status_of(port, "/no-such-page") for _ in range(19)]
        killed = sorted(worker_pids())[0]
        os.kill(killed, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while len(statuses) < 39:
            try:
                statuses.append(_status_of(port, "/no-such-page"))
            except OSError:
                assert time.monotonic() < deadline, "uvicorn did not replace the worker"
                time.sleep(0.1)
        # Answered by the door (no key: refused), then the server stops at once.
        refused = [_status_of(port, "/v2/track", "POST", b"{}") for _ in range(5)]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)

    assert statuses == [404] * 39
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))
    labels = {"door": "django", "endpoint": "unmatched", "status": "404"}
    assert registry.get_sample_value("eds_http_requests_total", labels) == 40
    assert len(set(refused)) == 1 and 400 <= refused[0] < 500
    assert registry.get_sample_value("eds_http_requests_total", _door_labels(refused[0])) == 5
    assert killed in worker_pids() and len(worker_pids()) >= 2
    assert not previous_run.exists()
