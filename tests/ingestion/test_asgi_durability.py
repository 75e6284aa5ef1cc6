"""A 202 from the ASGI door is durable: kill -9 the server mid-stream and every answered request
is in the acceptance store (the group-commit writer answers only after its commit)."""

import asyncio
import http.client
import os
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.db import connection

from ingestion import writer as writer_module
from ingestion.acceptance import Accepted, RequestError
from ingestion.backends.postgresql import PostgresIngestion
from ingestion.models import AcceptedRequest
from ingestion.writer import GroupCommitWriter
from tests.ingestion.frontdoors import database_url_of_tests, free_port, serve_in_subprocess

CLIENTS = 8
ANSWERED_BEFORE_KILL = 300


def wait_until_serving(port: int, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert server.poll() is None, "the server exited"
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the ASGI door did not start")


@pytest.mark.e2e
def test_kill_9_right_after_202s_loses_no_answered_request(transactional_db):
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_ENV": "embedded",
        "DATABASE_URL": database_url_of_tests(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "LOG_LEVEL": "WARNING",
    }
    server = serve_in_subprocess(port, env)  # as production runs it
    answered: list[str] = []
    threads: list[threading.Thread] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(number: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        for i in range(100_000):
            if stop.is_set():
                return
            user_id = f"usr_{number}_{i}"
            try:
                connection.request(
                    "POST",
                    "/v2/track",
                    body=f'{{"userId":"{user_id}","event":"Login"}}',
                    headers={"Authorization": "Basic durability-key"},
                )
                response = connection.getresponse()
                response.read()
            except (OSError, http.client.HTTPException):
                return  # the server is gone
            if response.status == 202:
                with lock:
                    answered.append(user_id)

    try:
        wait_until_serving(port, server)
        threads.extend(threading.Thread(target=client, args=(n,)) for n in range(CLIENTS))
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while len(answered) < ANSWERED_BEFORE_KILL and time.monotonic() < deadline:
            time.sleep(0.001)
        os.killpg(server.pid, signal.SIGKILL)  # mid-stream: requests are still in flight
        with lock:
            answered_at_kill = list(answered)
    finally:
        stop.set()
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
    for thread in threads:
        thread.join(timeout=10)

    assert len(answered_at_kill) >= ANSWERED_BEFORE_KILL
    stored_users = {
        message["userId"]
        for messages in AcceptedRequest.objects.values_list("messages", flat=True)
        for message in messages
    }
    missing = set(answered) - stored_users
    assert not missing, f"{len(missing)} requests answered 202 are not in the store"
    assert len(stored_users) >= len(answered)


@pytest.fixture(params=["event loop", "writer thread"])
def write_on(request, monkeypatch) -> str:
    """Where the writer writes: PostgreSQL's COPY on the event loop, or the thread SQLite's
    writes take (there through Django's connection)."""
    if request.param == "writer thread":
        monkeypatch.setattr(PostgresIngestion, "event_loop_writer", lambda backend: None)
    return request.param


@pytest.mark.postgresql
def test_a_request_the_database_refuses_fails_alone_not_its_whole_group_commit(
    transactional_db, write_on
):
    """Three requests gathered into one commit; PostgreSQL refuses one of them (a NUL character
    jsonb cannot hold). The other two are stored and answered; the third is refused."""
    writer = GroupCommitWriter(gather_seconds=0.05)
    now = datetime.now(UTC)

    def entry(user_id: str) -> list:
        message = {"type": "identify", "timestamp": 1793527200000, "userId": user_id}
        return [(now, Accepted(endpoint="v2/identify", key_digest="d" * 64, messages=[message]))]

    async def send_together():
        try:
            return await asyncio.gather(
                writer.store(entry("usr_ann")),
                writer.store(entry("usr_\x00bad")),
                writer.store(entry("usr_bo")),
                return_exceptions=True,
            )
        finally:
            await writer.close()

    ann, bad, bo = asyncio.run(send_together())
    assert ann is None and bo is None
    assert isinstance(bad, RequestError) and bad.status == 503
    stored_users = [
        messages[0]["userId"]
        for messages in AcceptedRequest.objects.order_by("id").values_list("messages", flat=True)
    ]
    assert stored_users == ["usr_ann", "usr_bo"]


def _identify(user_id: str) -> list:
    message = {"type": "identify", "timestamp": 1793527200000, "userId": user_id}
    now = datetime.now(UTC)
    return [(now, Accepted(endpoint="v2/identify", key_digest="d" * 64, messages=[message]))]


def _terminate_other_sessions() -> None:
    """What a database restart does to the writer's connection. Waits (up to 5 s) until each
    session is gone: a signalled backend that lingers on a loaded machine would still pass the
    writer's check and die under its next write."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.mark.postgresql
def test_the_writer_reconnects_after_its_connection_is_lost(
    transactional_db, monkeypatch, write_on
):
    """The writer keeps its connection between batches (no health check per batch). A batch
    that meets a dead connection gets a 503, which clients retry; the next batch reconnects.
    After a pause the connection is checked first, so nobody sees the error."""
    # Long enough that waiting for the sessions to go (a loaded machine: tenths of a second)
    # does not make usr_bo's write look idle; usr_di's pause is longer.
    monkeypatch.setattr(writer_module, "IDLE_CHECK_SECONDS", 2.0)
    writer = GroupCommitWriter(gather_seconds=0.001)

    async def scenario():
        outcomes = []
        try:
            for user_id, pause in (("usr_ann", 0), ("usr_bo", 0), ("usr_cy", 0), ("usr_di", 2.3)):
                if user_id in ("usr_bo", "usr_di"):
                    await asyncio.to_thread(_terminate_other_sessions)
                await asyncio.sleep(pause)
                try:
                    await writer.store(_identify(user_id))
                    outcomes.append((user_id, 202))
                except RequestError as error:
                    outcomes.append((user_id, error.status))
        finally:
            await writer.close()
        return outcomes

    assert asyncio.run(scenario()) == [
        ("usr_ann", 202),
        ("usr_bo", 503),  # met the dead connection at once
        ("usr_cy", 202),  # reconnected
        ("usr_di", 202),  # after a pause: checked, replaced, stored
    ]
    connection.close()  # this thread's session was terminated too
    stored = [m[0]["userId"] for m in AcceptedRequest.objects.values_list("messages", flat=True)]
    assert sorted(stored) == ["usr_ann", "usr_cy", "usr_di"]
