"""Sustained freshness: a 202 to a changed score, at a million users, under a steady mixed load.

    .venv/bin/python bench/bench_freshness.py --sustained               # 10 minutes (~15 in all)
    .venv/bin/python bench/bench_freshness.py --sustained --minutes 1   # a smoke run
    make bench BENCH=sustained                                          # bench/bench_sustained.py

Issue 75. The service runs as the README's production mode runs it, all on this box: uvicorn
(config.asgi, 2 workers, uvloop, httptools), the Celery worker of the `celery` queue (2 processes),
the `automations` and `marketplace` workers and beat, on PostgreSQL and Redis (db 11, port 8710).
Its database is a copy of the scoring benchmark's (eds_bench_scores, bench/seed_scoring.py: 1M
users, 100k accounts, 30M events), made afresh for every run (eds_bench_sustained), migrated by
the tree under test, scored and with its score history built before the load starts, so that
the load meets an installation in its steady state rather than a first full rescore.

For `--minutes`, a paced open-loop generator (request i due at start + i / rate, on whichever of
its keep-alive connections is free, more opened while none is; how far behind schedule the
requests left is printed) sends 3,000 single calls a second (v2 track, identify and group,
70/15/15, for 100,000 distinct seeded users, each with its own account, event names the
workspace weighs) and one /v1/batch of 100 messages a second. Meanwhile, twice a second, a
sample: a track of the workspace's heaviest event for a seeded user of an account the load never
touches, then, at each refresh commit the monitor sees (and at least once a second),
`GET /v2/users/{id}` until the user's raw score and events in the window have grown by it, then
`GET /v2/accounts/{id}` until the account's have too (the refresh that recomputes an account's
own figures computes its mean of its users' scores in the same transaction, so the mean is then
the new one). The time from the 202 to that answer is the event-to-score time; a sample not there
in 30 s is a miss, ranked above every other. Every second a monitor thread reads the acceptance
store's oldest request (the backlog's age); every 0.1 s the workspace's ScoringState (each
refresh's start and duration); /metrics is scraped before and after for the refreshes by mode.
CPU is read per process group. With the automation (the default; --no-automation leaves it out),
the workspace has a `new_user` webhook to a receiver in the script, and once a second a track for
a user never seen: printed is the time from the commit of the refresh that scored that user to
the webhook's arrival.

Exits 2 when it could not measure (no seeded template, a process that did not start, a warm-up
sample that never scored). Stops every process it started, by process group.
"""

# SQL is assembled from fixed names; values are query parameters.
# ruff: noqa: S608

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_freshness import (  # noqa: E402 (after the path is set)
    PYTHON,
    CouldNotMeasure,
    HttpConnection,
    Process,
    celery_beat_command,
    celery_worker_command,
    clear_broker,
    group_cpu_seconds,
    machine,
    measured,
    percentile,
    port_is_free,
    production_env,
    uvicorn_command,
    wait_for_server,
)
from bench.databases import migrate  # noqa: E402
from bench.targets import figure, settle  # noqa: E402

PG_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
TEMPLATE_DB = os.environ.get("BENCH_SCORES_DB", "eds_bench_scores")
DB_NAME = os.environ.get("BENCH_SUSTAINED_DB", "eds_bench_sustained")
DATABASE_URL = f"{PG_URL}/{DB_NAME}"
BROKER_URL = os.environ.get("BENCH_SUSTAINED_BROKER_URL", "redis://127.0.0.1:6379/11")
PORT = int(os.environ.get("BENCH_SUSTAINED_PORT", "8710"))
READ_PORT = PORT + 1  # --read-server's
# Below uvicorn's keep-alive (5 s): a connection idle longer is opened again before a POST.
KEEP_ALIVE_SECONDS = 4.0
HOST = "127.0.0.1"
METRICS_TOKEN = "bench-sustained-metrics-token"
GIVE_UP_SECONDS = 30.0  # a sample not scored by then is a miss
# Samples stop this long before the load does: one scored within it was under load throughout.
SAMPLE_TAIL_SECONDS = 10.0
WARMUP_SECONDS = 180.0  # the first sample: the first refresh after the start may be slow
LATE_SECONDS = 30.0  # a generator this far behind its schedule stops sending
LOAD_USERS = 100_000
# Of every 20 single calls: 14 tracks, 3 identifies, 3 groups.
MIX = ("track",) * 14 + ("identify",) * 3 + ("group",) * 3
BATCH_TRACKS, BATCH_IDENTIFIES = 80, 10  # of a batch's 100 messages; the rest are group calls
ROLES = ("admin", "member", "viewer")  # the seed's trait values, so traits change as they do
PLANS = ("free", "team", "business", "enterprise")


# --- Setup: the database copy, its credentials, its users -----------------------------------------


def _server():
    import psycopg

    return psycopg.connect(f"{PG_URL}/postgres", autocommit=True)


def database_copy() -> float:
    """eds_bench_sustained afresh from the seeded template; seconds it took. The template is
    only read: PostgreSQL copies it only while no session is connected to it."""
    started = time.monotonic()
    with _server() as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [TEMPLATE_DB]
        ).fetchone():
            raise CouldNotMeasure(
                f"no database {TEMPLATE_DB}: seed it first (.venv/bin/python bench/seed_scoring.py)"
            )
        sessions = conn.execute(
            "SELECT pid, application_name, state FROM pg_stat_activity WHERE datname = %s",
            [TEMPLATE_DB],
        ).fetchall()
        if sessions:
            raise CouldNotMeasure(
                f"{len(sessions)} session(s) connected to {TEMPLATE_DB} (pid, application, "
                f"state: {sessions}); it can be copied only when none is"
            )
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        # FILE_COPY: the files copied between two checkpoints, rather than every page written
        # through the WAL as PostgreSQL 15's default does, which is the slower for gigabytes.
        conn.execute(f'CREATE DATABASE "{DB_NAME}" TEMPLATE "{TEMPLATE_DB}" STRATEGY FILE_COPY')
    return time.monotonic() - started


def database_drop() -> None:
    with _server() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


# Run in the tree under test, on the copy: the seeded product's credentials, made through the
# apps' own services, and the workspace brought to its steady state (scored, history built).
_PREPARE_CODE = """
import json, os, time, django
django.setup()
from automations.models import Automation
from automations.services import automation_create
from engagement import history, scoring
from engagement.builtin_segments import builtin_segments_create
from engagement.models import Product, RefreshDemand, Segment, Workspace
from ingestion.services.keys import ingestion_key_create
from readapi.services import api_token_create
product = Product.objects.filter(name__startswith="bench-scoring ").order_by("id").first()
if product is None:
    raise SystemExit("the template holds no seeded product (bench/seed_scoring.py)")
workspace = Workspace.objects.filter(product=product).order_by("id").first()
if not Segment.objects.filter(workspace=workspace).exists():
    builtin_segments_create(workspace=workspace)  # what every workspace has; the seed skips it
key = ingestion_key_create(product_id=product.id, label="bench sustained")
_, token = api_token_create(product_id=product.id, name="bench sustained")
# Automations an earlier benchmark left in the template (bench_automations' three, to a receiver
# long gone) would add their evaluation to every refresh, and failing deliveries.
left = Automation.objects.filter(workspace=workspace)
steps = {"automations_removed": left.count()}
left.delete()
receiver = os.environ.get("BENCH_RECEIVER_URL")
if receiver:  # a webhook for every new user, to the script's receiver
    automation_create(workspace=workspace, trigger="new_user", url=receiver,
                      name="bench sustained: new users")
started = time.monotonic()
if history.score_history_is_due(workspace=workspace):
    steps["history"] = history.score_history_update(workspace_id=workspace.id).mode
steps["history_s"] = round(time.monotonic() - started, 1)
started = time.monotonic()
steps["refresh"] = scoring.workspace_refresh(workspace_id=workspace.id).mode
steps["refresh_s"] = round(time.monotonic() - started, 1)
# A refresh marked queued by whatever last applied events to the template (bench_scoring's
# tracks, in a process whose task no worker here will read): left in place, the warm-up's change
# finds it, queues nothing, and waits for beat's sweep to send it again (10 s, not the idle
# service's own time).
steps["stale_refresh_marks"] = RefreshDemand.objects.filter(
    workspace=workspace, queued_at__isnull=False).update(queued_at=None, behind_running=False)
print(json.dumps({"product_id": product.id, "product": product.name,
                  "workspace_id": workspace.id, "ingestion_key": key.key, "api_token": token,
                  "weights": {w.event_name: w.weight for w in workspace.weights.all()},
                  "steps": steps}))
"""


def prepare(env: dict[str, str]) -> dict:
    result = subprocess.run(
        [PYTHON, "-c", _PREPARE_CODE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if result.returncode != 0:
        raise CouldNotMeasure(f"preparing {DB_NAME} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


@dataclass(frozen=True, slots=True)
class Subject:
    """A sampled user and the one account they belong to (ids for the read API)."""

    user_id: int
    user_tracking_id: str
    account_id: int
    account_tracking_id: str


def people(product_id: int, samples: int) -> tuple[list[tuple[str, str]], list[Subject]]:
    """The load's users (tracking ids of a user and their account) and the samples' subjects.

    The load's users belong to even-numbered accounts, the samples' to odd-numbered ones, one
    user per account: a sample's user and account then change by its own event only, so that
    their figures growing by its weight tells its refresh apart from any other."""
    import psycopg

    with psycopg.connect(DATABASE_URL) as conn:
        load = conn.execute(
            """
            SELECT DISTINCT ON (u.id) u.tracking_id, a.tracking_id
            FROM engagement_user u
            JOIN engagement_membership m ON m.user_id = u.id
            JOIN engagement_account a ON a.id = m.account_id
            WHERE u.product_id = %s AND a.id %% 2 = 0
            ORDER BY u.id, a.id LIMIT %s
            """,
            [product_id, LOAD_USERS],
        ).fetchall()
        subjects = conn.execute(
            """
            SELECT DISTINCT ON (a.id) u.id, u.tracking_id, a.id, a.tracking_id
            FROM engagement_account a
            JOIN engagement_membership m ON m.account_id = a.id
            JOIN engagement_user u ON u.id = m.user_id
            WHERE a.product_id = %s AND a.id %% 2 = 1
              AND NOT EXISTS (SELECT 1 FROM engagement_membership o
                              WHERE o.user_id = u.id AND o.account_id <> a.id)
            ORDER BY a.id, u.id LIMIT %s
            """,
            [product_id, samples],
        ).fetchall()
    if len(load) < LOAD_USERS or len(subjects) < samples:
        raise CouldNotMeasure(
            f"{DB_NAME} has {len(load):,} users for the load (of {LOAD_USERS:,}) and "
            f"{len(subjects):,} for the samples (of {samples:,}): not the seeded scale"
        )
    return list(load), [Subject(*row) for row in subjects]


# --- The load generator: paced, open loop, on asyncio protocols -----------------------------------


def _response_end(buffer: bytearray) -> tuple[int, int] | None:
    """(status, length) of the complete HTTP/1.1 response at the start of `buffer`, None while
    it is incomplete. Content-Length or chunked bodies, as uvicorn sends them."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buffer[:end]).lower()
    status = int(head[9:12])
    at = head.find(b"\r\ncontent-length:")
    if at >= 0:
        start = at + len(b"\r\ncontent-length:")
        stop = head.find(b"\r\n", start)
        total = end + 4 + int(head[start : stop if stop >= 0 else None])
        return (status, total) if len(buffer) >= total else None
    if b"\r\ntransfer-encoding: chunked" not in head:
        raise ValueError("a response with neither Content-Length nor chunked encoding")
    position = end + 4
    while True:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None
        size = int(bytes(buffer[position:line_end]).split(b";")[0], 16)
        position = line_end + 2 + size + 2
        if len(buffer) < position:
            return None
        if size == 0:
            return status, position


class Lane(asyncio.Protocol):
    """One keep-alive connection of a pool: one request in flight at a time. A protocol rather
    than streams: the generator's CPU per request is a few callbacks, no task or future."""

    def __init__(self, pool: LanePool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.sent_at = 0.0
        self.busy = False

    def connection_made(self, transport) -> None:  # noqa: ANN001 (asyncio's signature)
        self.transport = transport

    def send(self, payload: bytes) -> None:
        assert self.transport is not None
        self.busy = True
        # The clock read here, not the loop's cached one (uvloop's moves in milliseconds).
        self.sent_at = time.monotonic()
        self.transport.write(payload)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        try:
            done = _response_end(self.buffer)
        except ValueError:
            self.busy = False  # counted here, not again when the connection is lost
            self.pool.errors += 1
            self.close()
            return
        if done is None:
            return
        status, length = done
        del self.buffer[:length]
        self.busy = False
        self.pool.answered(self, status, time.monotonic() - self.sent_at)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.pool.lost(self)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class LanePool:
    """Keep-alive connections to the door, the free ones in a FIFO (so every connection is used
    and none idles into the server's keep-alive timeout); answers counted by status and timed."""

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int, most: int | None = None) -> None:
        self.loop = loop
        self.size = size
        self.most = most or size  # grown up to this many while none is free (grow)
        self.opening = 0
        self.peak = 0
        self.free: deque[Lane] = deque()
        self.lanes: set[Lane] = set()
        self.answer_seconds = array("d")
        self.statuses: dict[int, int] = {}
        self.errors = 0  # sent, but the connection closed or answered garbage
        self.closing = False
        self.reconnecting: set[asyncio.Task] = set()  # held: the loop keeps only weak ones

    async def open(self) -> None:
        while len(self.lanes) < self.size:
            await self._connect()

    async def _connect(self) -> None:
        _, lane = await self.loop.create_connection(lambda: Lane(self), HOST, PORT)
        self.lanes.add(lane)
        self.free.append(lane)
        self.peak = max(self.peak, len(self.lanes))

    def grow(self, wanted: int) -> None:
        """Open up to `wanted` more connections, within `most`: requests due while every
        connection waits on an answer are not held back by the client (open loop)."""
        for _ in range(min(wanted, self.most - len(self.lanes) - self.opening)):
            self.opening += 1
            task = self.loop.create_task(self._grown())
            self.reconnecting.add(task)
            task.add_done_callback(self.reconnecting.discard)

    async def _grown(self) -> None:
        try:
            with contextlib.suppress(OSError):
                await self._connect()
        finally:
            self.opening -= 1

    def answered(self, lane: Lane, status: int, seconds: float) -> None:
        self.answer_seconds.append(seconds)
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.free.append(lane)

    def lost(self, lane: Lane) -> None:
        if lane.busy:
            self.errors += 1
        self.lanes.discard(lane)
        with contextlib.suppress(ValueError):
            self.free.remove(lane)
        if not self.closing:
            task = self.loop.create_task(self._reconnect())
            self.reconnecting.add(task)
            task.add_done_callback(self.reconnecting.discard)

    async def _reconnect(self) -> None:
        with contextlib.suppress(OSError):
            await self._connect()

    def in_flight(self) -> int:
        return sum(lane.busy for lane in self.lanes)

    def close(self) -> None:
        self.closing = True
        for lane in list(self.lanes):
            lane.close()


@dataclass
class LoadFigures:
    singles_due: int = 0
    singles_sent: int = 0
    batches_sent: int = 0
    send_seconds: float = 0.0
    lag_seconds: array = field(default_factory=lambda: array("d"))  # each single: sent - due
    unsent: int = 0  # left when the generator fell LATE_SECONDS behind
    cpu_seconds: float = 0.0  # the event loop's thread: generator and samplers


class Load:
    """Single calls at `rate` a second and a batch of `batch_size` every 1 / `batch_rate` s,
    each due at a fixed time; a request leaves on the first free connection."""

    def __init__(
        self,
        *,
        key: str,
        users: list[tuple[str, str]],
        weighted: list[str],
        rate: float,
        batch_rate: float,
        batch_size: int,
        seconds: float,
        connections: int,
    ) -> None:
        self.rate = rate
        self.batch_rate = batch_rate
        self.batch_size = batch_size
        self.seconds = seconds
        self.connections = connections
        # Quoted once: a body is then a few string joins.
        self.users = [(json.dumps(user), json.dumps(account)) for user, account in users]
        self.events = [json.dumps(name) for name in weighted]
        # The same users in the same order every run: the singles' and the batches' own draws.
        self.random = random.Random(75)
        self.batch_random = random.Random(76)
        self.tag = f"sus{int(time.time())}"
        self.figures = LoadFigures()
        self.single_head = {
            path: (
                f"POST {path} HTTP/1.1\r\nHost: {HOST}:{PORT}\r\n"
                f"Authorization: Basic {key}\r\nContent-Type: application/json\r\n"
            )
            for path in ("/v2/track", "/v2/identify", "/v2/group")
        }
        basic = base64.b64encode(f"{key}:".encode()).decode()
        self.batch_head = (
            f"POST /v1/batch HTTP/1.1\r\nHost: {HOST}:{PORT}\r\n"
            f"Authorization: Basic {basic}\r\nContent-Type: application/json\r\n"
        )

    def single(self, i: int) -> bytes:
        user, account = self.users[self.random.randrange(len(self.users))]
        now_ms = int(time.time() * 1000)
        kind = MIX[i % len(MIX)]
        if kind == "track":
            event = self.events[i % len(self.events)]
            body = (
                f'{{"userId":{user},"event":{event},"timestamp":{now_ms},'
                f'"context":{{"groupId":{account}}}}}'
            )
        elif kind == "identify":
            body = f'{{"userId":{user},"traits":{{"role":"{ROLES[i % 3]}"}},"timestamp":{now_ms}}}'
        else:
            body = (
                f'{{"userId":{user},"groupId":{account},'
                f'"traits":{{"plan":"{PLANS[i % 4]}"}},"timestamp":{now_ms}}}'
            )
        data = body.encode()
        head = self.single_head[f"/v2/{kind}"]
        return f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data

    def batch(self, j: int) -> bytes:
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        messages = []
        for m in range(self.batch_size):
            user, account = self.users[self.batch_random.randrange(len(self.users))]
            common = f'"userId":{user},"timestamp":"{now}","messageId":"{self.tag}-{j}-{m}"'
            share = m * 100 // self.batch_size
            if share < BATCH_TRACKS:
                event = self.events[m % len(self.events)]
                messages.append(
                    f'{{"type":"track",{common},"event":{event},"context":{{"groupId":{account}}}}}'
                )
            elif share < BATCH_TRACKS + BATCH_IDENTIFIES:
                messages.append(
                    f'{{"type":"identify",{common},"traits":{{"role":"{ROLES[m % 3]}"}}}}'
                )
            else:
                messages.append(
                    f'{{"type":"group",{common},"groupId":{account},'
                    f'"traits":{{"plan":"{PLANS[m % 4]}"}}}}'
                )
        data = f'{{"batch":[{",".join(messages)}],"sentAt":"{now}"}}'.encode()
        return f"{self.batch_head}Content-Length: {len(data)}\r\n\r\n".encode() + data

    async def send_singles(self, pool: LanePool, start: float) -> None:
        loop = asyncio.get_running_loop()
        figures = self.figures
        total = figures.singles_due = int(self.rate * self.seconds)
        stop_by = start + self.seconds + LATE_SECONDS
        i = 0
        while i < total:
            now = loop.time()
            if now > stop_by:
                figures.unsent = total - i
                break
            due = min(total, int((now - start) * self.rate) + 1)
            while i < due and pool.free:
                # Late when no connection was free at its time, or the loop was busy.
                figures.lag_seconds.append(max(0.0, now - (start + i / self.rate)))
                pool.free.popleft().send(self.single(i))
                i += 1
            if i < due:
                pool.grow(due - i)
            # Until the next request's time, or while waiting for a free connection; at least a
            # millisecond, uvloop's timer resolution (a shorter sleep would spin the CPU).
            await asyncio.sleep(max(start + i / self.rate - loop.time(), 0.001))
        figures.singles_sent = i
        figures.send_seconds = loop.time() - start

    async def send_batches(self, pool: LanePool, start: float) -> None:
        loop = asyncio.get_running_loop()
        total = int(self.batch_rate * self.seconds)
        for j in range(total):
            wait = start + j / self.batch_rate - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            while not pool.free:
                await asyncio.sleep(0.001)
            pool.free.popleft().send(self.batch(j))
            self.figures.batches_sent += 1


# --- Samples: a track, then the read API until the user's and the account's scores show it --------


@dataclass
class SampleFigures:
    planned: int = 0
    latencies: list[float] = field(default_factory=list)  # 202 -> the answer showing both
    not_before: list[float] = field(default_factory=list)  # 202 -> the last poll not showing it
    user_latencies: list[float] = field(default_factory=list)  # 202 -> the user's alone
    misses: int = 0
    misses_user_scored: int = 0  # of the misses, those whose user had scored, not the account
    failed: int = 0  # the baseline read or the track call failed: no sample
    polls: int = 0
    poll_errors: int = 0
    poll_seconds: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RecordFigures:
    """A record's figures that grow with each of its counted events."""

    raw_score: float
    events_in_window: int

    @classmethod
    def of(cls, record: dict) -> RecordFigures:
        return cls(float(record.get("raw_score") or 0), int(record.get("events_in_window") or 0))

    def counts(self, before: RecordFigures, weight: int) -> bool:
        return (
            self.events_in_window >= before.events_in_window + 1
            and self.raw_score >= before.raw_score + weight
        )


def poll_interval(elapsed: float) -> float:
    """Without the monitor (the warm-up): every 100 ms for the first 2 s, then a twentieth of
    the time waited, at most 0.5 s."""
    return min(0.5, max(0.1, elapsed / 20))


# With the monitor, a sample reads again when the workspace's ScoringState changed (a refresh
# committed: the only moment a score can move), and at least this often whatever it says.
FALLBACK_POLL_SECONDS = 1.0


class Sampler:
    def __init__(
        self,
        *,
        product: dict,
        event: str,
        weight: int,
        connections: int,
        give_up: float,
        read_port: int = PORT,
    ) -> None:
        self.workspace_id = product["workspace_id"]
        self.event = event
        self.weight = weight
        self.give_up = give_up
        self.read_headers = {"Authorization": f"Bearer {product['api_token']}"}
        self.track_headers = {
            "Content-Type": "application/json",
            "Authorization": f"Basic {product['ingestion_key']}",
        }
        self.pool: asyncio.Queue[HttpConnection] = asyncio.Queue()
        for _ in range(connections):
            self.pool.put_nowait(HttpConnection(PORT))
        # With a read server of their own (--read-server), the reads go there and only the
        # samples' tracks to the door.
        self.read_pool = self.pool
        if read_port != PORT:
            self.read_pool = asyncio.Queue()
            for _ in range(connections):
                self.read_pool.put_nowait(HttpConnection(read_port))
        self.figures = SampleFigures()
        self.tasks: set[asyncio.Task] = set()
        # Refreshes seen by the monitor (None: no monitor, poll on a timer), and the samples
        # waiting for the next one.
        self.refreshes_seen: int | None = None
        self.waiting: set[asyncio.Future] = set()

    def refreshed(self) -> None:
        """The monitor saw the ScoringState change: every waiting sample reads again. Called
        in the loop's thread (call_soon_threadsafe)."""
        self.refreshes_seen = (self.refreshes_seen or 0) + 1
        for future in self.waiting:
            if not future.done():
                future.set_result(None)
        self.waiting.clear()

    async def next_look(self, seen: int | None, elapsed: float) -> None:
        """Wait for the next refresh after the `seen`-th (at most FALLBACK_POLL_SECONDS), or
        without the monitor, poll_interval."""
        if self.refreshes_seen is None:
            await asyncio.sleep(poll_interval(elapsed))
            return
        if self.refreshes_seen != seen:
            return  # one committed while the last answer was on its way
        future = asyncio.get_running_loop().create_future()
        self.waiting.add(future)
        try:
            await asyncio.wait_for(future, FALLBACK_POLL_SECONDS)
        except TimeoutError:
            self.waiting.discard(future)

    async def call(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> tuple[int, bytes] | None:
        """The answer (status, body), None when there was none. A GET is sent again once on
        a new connection: the server may have closed an idle one just as it was used."""
        pool = self.read_pool if method == "GET" else self.pool
        connection = await pool.get()
        if method != "GET" and connection.idle_seconds() > KEEP_ALIVE_SECONDS:
            # The server may have closed it meanwhile, and a POST is not sent twice.
            connection.close()
        try:
            for attempt in range(2 if method == "GET" else 1):
                try:
                    return await connection.request(method, path, headers, body)
                except (OSError, asyncio.IncompleteReadError, ValueError):
                    if attempt:
                        return None
            return None
        finally:
            pool.put_nowait(connection)

    async def read(self, kind: str, record_id: int) -> tuple[RecordFigures | None, float]:
        """The record's figures (None when the read failed) and when it was asked."""
        asked_at = time.monotonic()
        answer = await self.call(
            "GET", f"/v2/{kind}/{record_id}?workspace_id={self.workspace_id}", self.read_headers
        )
        self.figures.polls += 1
        self.figures.poll_seconds.append(time.monotonic() - asked_at)
        if answer is None or answer[0] != 200:
            self.figures.poll_errors += 1
            return None, asked_at
        return RecordFigures.of(json.loads(answer[1])), asked_at

    async def track(self, subject: Subject) -> bool:
        body = json.dumps(
            {
                "userId": subject.user_tracking_id,
                "event": self.event,
                "timestamp": int(time.time() * 1000),
                "context": {"groupId": subject.account_tracking_id},
            }
        ).encode()
        answer = await self.call("POST", "/v2/track", self.track_headers, body)
        return answer is not None and answer[0] == 202

    async def sample(self, subject: Subject) -> float | None:
        """One sample; seconds from the 202 to both records showing the event (None: a miss or
        no sample), recorded in the figures."""
        figures = self.figures
        user_before, _ = await self.read("users", subject.user_id)
        account_before, _ = await self.read("accounts", subject.account_id)
        if user_before is None or account_before is None or not await self.track(subject):
            figures.failed += 1
            return None
        accepted_at = time.monotonic()
        user_at: float | None = None
        last_miss = accepted_at
        while time.monotonic() - accepted_at < self.give_up:
            seen = self.refreshes_seen  # before the reads: a refresh during them is looked at
            if user_at is None:
                now_figures, asked_at = await self.read("users", subject.user_id)
                if now_figures is not None and now_figures.counts(user_before, self.weight):
                    user_at = time.monotonic() - accepted_at
                    figures.user_latencies.append(user_at)
                else:
                    last_miss = max(last_miss, asked_at)
            if user_at is not None:
                now_figures, asked_at = await self.read("accounts", subject.account_id)
                if now_figures is not None and now_figures.counts(account_before, self.weight):
                    latency = time.monotonic() - accepted_at
                    figures.latencies.append(latency)
                    figures.not_before.append(last_miss - accepted_at)
                    return latency
                last_miss = max(last_miss, asked_at)
            await self.next_look(seen, time.monotonic() - accepted_at)
        figures.misses += 1
        figures.misses_user_scored += user_at is not None
        return None

    async def run(self, subjects: list[Subject], rate: float, start: float, seconds: float):
        """`rate` samples a second from `start` (monotonic) for `seconds`, each on its own
        subject; returns once the last has scored or given up."""
        count = min(len(subjects), int(rate * seconds))
        self.figures.planned = count
        for n in range(count):
            wait = start + n / rate - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            task = asyncio.get_running_loop().create_task(self.sample(subjects[n]))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        if self.tasks:
            await asyncio.wait(set(self.tasks))

    async def close(self) -> None:
        for pool in {id(self.pool): self.pool, id(self.read_pool): self.read_pool}.values():
            while not pool.empty():
                pool.get_nowait().close()


class Receiver:
    """The automation's webhook receiver: a threaded HTTP server on 127.0.0.1 that notes when
    each delivery arrived (wall clock, as the database's) with its body."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, dict]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                arrived = time.time()
                with contextlib.suppress(ValueError):
                    receiver.arrivals.append((arrived, json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server.server_address[1]}/hooks/eds"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class NewUsers:
    """Tracks for users never seen, each firing the `new_user` automation once it is scored."""

    tracked: dict[str, float] = field(default_factory=dict)  # tracking id -> 202 (wall clock)
    failed: int = 0


async def new_users_run(
    sampler: Sampler, rate: float, start: float, seconds: float, tag: str
) -> NewUsers:
    """`rate` tracks a second, from `start` (monotonic) for `seconds`, each for a new user with
    no account (so no sampled account changes)."""
    found = NewUsers()
    for n in range(int(rate * seconds)):
        wait = start + n / rate - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        user = f"{tag}-new-{n}"
        body = json.dumps(
            {"userId": user, "event": sampler.event, "timestamp": int(time.time() * 1000)}
        ).encode()
        answer = await sampler.call("POST", "/v2/track", sampler.track_headers, body)
        if answer is not None and answer[0] == 202:
            found.tracked[user] = time.time()
        else:
            found.failed += 1
    return found


# --- The monitor: backlog age and refreshes, read from the database -------------------------------


@dataclass
class Refresh:
    started: datetime  # ScoringState.refreshed_at: the refresh's `now`, taken as it began
    seconds: float  # ScoringState.last_refresh_ms
    full: bool


@dataclass
class MonitorFigures:
    backlog_age: list[float] = field(default_factory=list)  # one a second
    backlog_requests: list[int] = field(default_factory=list)
    refreshes: list[Refresh] = field(default_factory=list)
    errors: int = 0


class Monitor(threading.Thread):
    """Every second the acceptance store's oldest request (the backlog's age); every 0.1 s the
    workspace's ScoringState, each new `refreshed_at` a refresh that committed. Its own thread
    and connection, so that a slow answer never delays the generator's schedule."""

    STATE_EVERY = 0.1
    BACKLOG_EVERY = 1.0

    def __init__(self, workspace_id: int, on_change: Callable[[], object]) -> None:
        super().__init__(daemon=True)
        self.workspace_id = workspace_id
        self.on_change = on_change  # called from this thread when the ScoringState changed
        self.figures = MonitorFigures()
        self.stopping = threading.Event()

    def run(self) -> None:
        import psycopg

        next_backlog = time.monotonic()
        last: datetime | None = None
        last_through: datetime | None = None
        conn = None
        while not self.stopping.is_set():
            try:
                if conn is None:
                    conn = psycopg.connect(DATABASE_URL, autocommit=True)
                if time.monotonic() >= next_backlog:
                    next_backlog += self.BACKLOG_EVERY
                    # received_at: for a group-committed row, the latest of its requests' times
                    # (ingestion/models.py), so this understates by at most the gather window.
                    backlog = conn.execute(
                        "SELECT coalesce(extract(epoch FROM clock_timestamp() - "
                        "min(received_at)), 0)::float8, coalesce(sum(request_count), 0)::bigint "
                        "FROM ingestion_acceptedrequest"
                    ).fetchone()
                    if backlog is not None:  # an aggregate: always one row
                        self.figures.backlog_age.append(max(0.0, backlog[0]))
                        self.figures.backlog_requests.append(backlog[1])
                row = conn.execute(
                    "SELECT refreshed_at, last_refresh_ms, full_rescored_at = refreshed_at, "
                    "scored_through FROM engagement_scoringstate WHERE workspace_id = %s",
                    [self.workspace_id],
                ).fetchone()
                if row and row[0] is not None and row[0] != last:
                    if last is not None:  # the one before the load began is not counted
                        self.figures.refreshes.append(Refresh(row[0], row[1] / 1000, bool(row[2])))
                    last = row[0]
                # A refresh that found nothing to score moves only the watermark.
                if row and row[3] != last_through:
                    last_through = row[3]
                    self.on_change()
            except Exception:  # noqa: BLE001 (a lost sample is counted; the run goes on)
                self.figures.errors += 1
                with contextlib.suppress(Exception):
                    if conn is not None:
                        conn.close()
                conn = None
            self.stopping.wait(self.STATE_EVERY)
        if conn is not None:
            conn.close()


# --- CPU of what is not ours: PostgreSQL, Redis, the machine --------------------------------------


_TICKS = os.sysconf("SC_CLK_TCK")


def named_cpu_ticks(names: tuple[str, ...]) -> dict[int, tuple[str, int]]:
    """{pid: (name, user + system ticks)} of every process called one of `names`."""
    found: dict[int, tuple[str, int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.find("(") + 1 : text.rfind(")")]
        if name in names:
            fields = text.rsplit(")", 1)[1].split()
            found[int(stat.parent.name)] = (name, int(fields[11]) + int(fields[12]))
    return found


def machine_busy_ticks() -> tuple[int, int]:
    with open("/proc/stat") as stat:
        values = [int(value) for value in stat.readline().split()[1:]]
    return sum(values) - values[3] - values[4], sum(values)


class CpuWatch:
    """Cores used over the load by each process group we started, by PostgreSQL's and Redis's
    processes (those alive at the end: a backend that exited meanwhile is not counted), by the
    load generator's thread, and by the whole machine."""

    OTHERS = ("postgres", "redis-server")

    def __init__(self, groups: dict[str, int]) -> None:
        self.groups = groups

    def start(self) -> CpuWatch:
        self.started = time.monotonic()
        self.before = {label: group_cpu_seconds(pid) for label, pid in self.groups.items()}
        self.others_before = named_cpu_ticks(self.OTHERS)
        self.machine_before = machine_busy_ticks()
        return self

    def stop(self) -> None:
        self.seconds = seconds = time.monotonic() - self.started
        self.cores = {
            label: (group_cpu_seconds(pid) - self.before[label]) / seconds
            for label, pid in self.groups.items()
        }
        for name in self.OTHERS:
            ticks = sum(
                total - self.others_before.get(pid, (name, 0))[1]
                for pid, (found, total) in named_cpu_ticks(self.OTHERS).items()
                if found == name
            )
            self.cores[name] = ticks / _TICKS / seconds
        busy, total = machine_busy_ticks()
        share = (busy - self.machine_before[0]) / max(1, total - self.machine_before[1])
        self.cores["machine (all processes)"] = share * (os.cpu_count() or 1)


# --- /metrics: the refreshes by mode --------------------------------------------------------------


# Per refresh mode: refreshes, their seconds, the users and the accounts they recomputed.
ModeCounts = tuple[float, float, float, float]


async def refresh_counts() -> dict[str, ModeCounts]:
    """{mode: (count, seconds, users, accounts)} from eds_score_refresh_duration_seconds and
    eds_score_refresh_recomputed_total, summed over processes."""
    connection = HttpConnection(PORT)
    try:
        status, body = await connection.request(
            "GET", "/metrics", {"Authorization": f"Bearer {METRICS_TOKEN}"}
        )
    except (OSError, asyncio.IncompleteReadError, ValueError):
        return {}
    finally:
        connection.close()
    if status != 200:
        return {}
    found: dict[str, list[float]] = {}
    for line in body.decode().splitlines():
        for prefix, index in (
            ("eds_score_refresh_duration_seconds_count{", 0),
            ("eds_score_refresh_duration_seconds_sum{", 1),
            ("eds_score_refresh_recomputed_total{", 2),
        ):
            if line.startswith(prefix):
                labels, value = line[len(prefix) :].rsplit("} ", 1)
                mode = labels.split('mode="', 1)[1].split('"', 1)[0]
                if index == 2 and 'kind="account"' in labels:
                    index = 3
                found.setdefault(mode, [0.0, 0.0, 0.0, 0.0])[index] += float(value)
    return {
        mode: (count, total, users, accounts)
        for mode, (count, total, users, accounts) in found.items()
    }


def sampling_seconds(load_seconds: float) -> float:
    """How long samples are taken, from the load's start."""
    return max(load_seconds - SAMPLE_TAIL_SECONDS, load_seconds / 2)


# --- The run --------------------------------------------------------------------------------------


@dataclass
class Run:
    load: LoadFigures
    singles: LanePool
    batches: LanePool
    samples: SampleFigures
    monitor: MonitorFigures
    cpu: dict[str, float]
    refreshes_by_mode: dict[str, ModeCounts]
    load_average: tuple[float, float]
    new_users: NewUsers | None  # with the automation: the new users tracked
    arrivals: list[tuple[float, dict]]  # the webhooks the receiver took (wall clock, body)


async def warm_up(product: dict, event: str, weight: int, subject: Subject) -> float:
    """One sample through the whole path, waiting longer: proves it works and warms it up."""
    sampler = Sampler(
        product=product, event=event, weight=weight, connections=2, give_up=WARMUP_SECONDS
    )
    try:
        latency = await sampler.sample(subject)
    finally:
        await sampler.close()
    if latency is None:
        how = "failed" if sampler.figures.failed else f"not scored within {WARMUP_SECONDS:.0f} s"
        raise CouldNotMeasure(f"the warm-up sample {how} ({sampler.figures})")
    return latency


async def measure_load(
    args: argparse.Namespace,
    *,
    product: dict,
    users: list[tuple[str, str]],
    subjects: list[Subject],
    weighted: list[str],
    event: str,
    groups: dict[str, int],
    receiver: Receiver | None,
) -> Run:
    loop = asyncio.get_running_loop()
    seconds = args.minutes * 60
    load = Load(
        key=product["ingestion_key"],
        users=users,
        weighted=weighted,
        rate=args.rate,
        batch_rate=args.batch_rate,
        batch_size=args.batch_size,
        seconds=seconds,
        connections=args.connections,
    )
    singles = LanePool(loop, args.connections, args.max_connections)
    # Two connections, each used every other second: within uvicorn's 5 s keep-alive.
    batches = LanePool(loop, 2)
    await singles.open()
    await batches.open()
    sampler = Sampler(
        product=product,
        event=event,
        weight=product["weights"][event],
        connections=args.sample_connections,
        give_up=GIVE_UP_SECONDS,
        read_port=READ_PORT if args.read_server else PORT,
    )
    monitor = Monitor(product["workspace_id"], lambda: loop.call_soon_threadsafe(sampler.refreshed))
    sampler.refreshes_seen = 0  # from now on, samples read again as refreshes commit
    by_mode_before = await refresh_counts()
    load_start = os.getloadavg()[0]
    cpu_thread = time.thread_time()
    cpu = CpuWatch(groups).start()
    monitor.start()
    start = loop.time() + 0.2
    start_monotonic = time.monotonic() + (start - loop.time())
    sampled = sampling_seconds(seconds)
    watchers = [
        loop.create_task(sampler.run(subjects, args.samples_per_second, start_monotonic, sampled))
    ]
    if receiver is not None:
        watchers.append(
            loop.create_task(
                new_users_run(sampler, args.automation_rate, start_monotonic, sampled, load.tag)
            )
        )
    await asyncio.gather(load.send_singles(singles, start), load.send_batches(batches, start))
    # The last answers in flight, then the CPU over the load alone.
    deadline = loop.time() + 10
    while (singles.in_flight() or batches.in_flight()) and loop.time() < deadline:
        await asyncio.sleep(0.05)
    cpu.stop()
    load.figures.cpu_seconds = time.thread_time() - cpu_thread
    singles.close()
    batches.close()
    # Samples still waiting for their scores (taken at most SAMPLE_TAIL_SECONDS before the end).
    await asyncio.gather(*watchers)
    new_users = watchers[1].result() if receiver is not None else None
    monitor.stopping.set()
    monitor.join(timeout=5)
    by_mode_after = await refresh_counts()
    await sampler.close()
    cpu.cores["load generator and samplers"] = load.figures.cpu_seconds / cpu.seconds
    return Run(
        load=load.figures,
        singles=singles,
        batches=batches,
        samples=sampler.figures,
        monitor=monitor.figures,
        cpu=cpu.cores,
        refreshes_by_mode={
            mode: (
                after[0] - by_mode_before.get(mode, (0.0,) * 4)[0],
                after[1] - by_mode_before.get(mode, (0.0,) * 4)[1],
                after[2] - by_mode_before.get(mode, (0.0,) * 4)[2],
                after[3] - by_mode_before.get(mode, (0.0,) * 4)[3],
            )
            for mode, after in by_mode_after.items()
        },
        load_average=(load_start, os.getloadavg()[0]),
        new_users=new_users,
        arrivals=list(receiver.arrivals) if receiver is not None else [],
    )


# --- Report ---------------------------------------------------------------------------------------


def _ms(value: float) -> str:
    return "miss" if value == float("inf") else f"{value * 1000:,.0f}"


def _quantiles(values, fractions=(0.5, 0.95, 0.99, 1.0), unit=_ms) -> str:
    ordered = sorted(values)
    if not ordered:
        return "-"
    return " / ".join(unit(percentile(ordered, q)) for q in fractions)


def _seconds(value: float) -> str:
    return f"{value:,.2f}"


def report(args: argparse.Namespace, run: Run, product: dict, event: str) -> None:
    load, samples, monitor = run.load, run.samples, run.monitor
    duration = max(load.send_seconds, 1e-9)
    accepted = run.singles.statuses.get(202, 0)
    other = sum(n for status, n in run.singles.statuses.items() if status != 202)
    batch_ok = run.batches.statuses.get(200, 0)
    batch_other = sum(n for status, n in run.batches.statuses.items() if status != 200)
    # A miss ranks above every scored sample.
    ranked = sorted(samples.latencies) + [float("inf")] * samples.misses
    lower = sorted(samples.not_before) + [float("inf")] * samples.misses
    refreshes = monitor.refreshes
    starts = [r.started.timestamp() for r in refreshes]
    between = [later - earlier for earlier, later in zip(starts, starts[1:], strict=False)]
    # From one refresh's commit to the next one's start: time when no refresh ran.
    idle_gaps = [
        later.started.timestamp() - (earlier.started.timestamp() + earlier.seconds)
        for earlier, later in zip(refreshes, refreshes[1:], strict=False)
    ]
    by_mode = ", ".join(
        f"{mode} {count:,.0f}"
        + (f" (mean {total / count:.2f} s" if count else "")
        + (f", {users / count:,.0f} users and {accounts / count:,.0f} accounts" if users else "")
        + (")" if count else "")
        for mode, (count, total, users, accounts) in sorted(run.refreshes_by_mode.items())
        if count
    )
    rows = [
        ("duration (s)", f"{load.send_seconds:,.1f}"),
        (
            "the samples' reads served by",
            f"a read server of their own (port {READ_PORT})"
            if args.read_server
            else "the door's processes, as the README runs them",
        ),
        (
            "single calls offered / achieved (req/s)",
            f"{args.rate:,.0f} / {load.singles_sent / duration:,.0f}",
        ),
        (
            f"batches of {args.batch_size} offered / achieved (/s)",
            f"{args.batch_rate:g} / {load.batches_sent / duration:.2f}",
        ),
        (
            "messages a second, achieved",
            f"{(load.singles_sent + load.batches_sent * args.batch_size) / duration:,.0f}",
        ),
        (
            "single calls: 202 / other / no answer",
            f"{accepted:,} / {other:,} / {run.singles.errors:,}",
        ),
        (
            "batches: 200 / other / no answer",
            f"{batch_ok:,} / {batch_other:,} / {run.batches.errors:,}",
        ),
        (
            "door answer p50 / p99, single calls (ms)",
            _quantiles(run.singles.answer_seconds, (0.5, 0.99), lambda v: f"{v * 1000:,.1f}"),
        ),
        (
            "batch answer p50 / p99 (ms)",
            _quantiles(run.batches.answer_seconds, (0.5, 0.99), lambda v: f"{v * 1000:,.1f}"),
        ),
        (
            "sent behind schedule p50 / p99 / max (ms)",
            _quantiles(load.lag_seconds, (0.5, 0.99, 1.0), lambda v: f"{v * 1000:,.1f}"),
        ),
        (f"not sent ({LATE_SECONDS:.0f} s behind schedule)", f"{load.unsent:,}"),
        ("generator's connections: at first / most", f"{args.connections} / {run.singles.peak}"),
        (
            f"samples: planned / scored / missed ({GIVE_UP_SECONDS:.0f} s) / failed",
            f"{samples.planned:,} / {len(samples.latencies):,} / {samples.misses:,} / "
            f"{samples.failed:,}",
        ),
        ("event to score p50 / p95 / p99 / max (ms)", _quantiles(ranked)),
        ("  not yet scored at p50 / p95 / p99 (ms)", _quantiles(lower, (0.5, 0.95, 0.99))),
        (
            "  the user's own score p50 / p95 / p99 (ms)",
            _quantiles(samples.user_latencies, (0.5, 0.95, 0.99)),
        ),
        ("  misses whose user had scored", f"{samples.misses_user_scored:,}"),
        (
            "read API polls (errors), answer p50 / p99 (ms)",
            f"{samples.polls:,} ({samples.poll_errors:,}), "
            + _quantiles(samples.poll_seconds, (0.5, 0.99), lambda v: f"{v * 1000:,.1f}"),
        ),
        (
            f"backlog's oldest p50 / p99 / max (s, {len(monitor.backlog_age)} seconds)",
            _quantiles(monitor.backlog_age, (0.5, 0.99, 1.0), _seconds),
        ),
        ("backlog's most requests waiting", f"{max(monitor.backlog_requests, default=0):,}"),
        (
            "refreshes committed (full among them)",
            f"{len(refreshes):,} ({sum(r.full for r in refreshes):,})",
        ),
        (
            "refresh duration p50 / p95 / max (s)",
            _quantiles([r.seconds for r in refreshes], (0.5, 0.95, 1.0), _seconds),
        ),
        (
            "start to next start p50 / p95 / max (s)",
            _quantiles(between, (0.5, 0.95, 1.0), _seconds),
        ),
        (
            "commit to next start p50 / p95 / max (s)",
            _quantiles(idle_gaps, (0.5, 0.95, 1.0), _seconds),
        ),
        ("refresh tasks by mode (/metrics)", by_mode or "-"),
        (
            "load average 1 min: start / end",
            f"{run.load_average[0]:.2f} / {run.load_average[1]:.2f}",
        ),
    ]
    if run.new_users is not None:
        rows.extend(automation_rows(run))
    width = max(len(label) for label, _ in rows)
    print()
    print(f"{'sustained: a 202 to a changed score, 1M users':<{width}}  value")
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    print("CPU over the load (cores): " + ", ".join(f"{k} {v:.2f}" for k, v in run.cpu.items()))
    print(
        f"samples: {event} (weight {product['weights'][event]}) for a user of an account the load "
        "never touches; scored when GET /v2/users/{id} and then GET /v2/accounts/{id} show "
        "raw_score and events_in_window grown by it; read again at each refresh commit the "
        f"monitor sees (ScoringState every {Monitor.STATE_EVERY:g} s), at least every "
        f"{FALLBACK_POLL_SECONDS:g} s"
    )
    if monitor.errors:
        print(f"(the monitor lost {monitor.errors} samples to database errors)")
    achieved = load.singles_sent / duration
    if achieved < 0.97 * args.rate or load.unsent:
        print(
            f"the offered rate was not sustained ({achieved:,.0f} of {args.rate:,.0f} req/s): "
            "see how far behind schedule the requests left, and the CPU"
        )
    door_p99 = percentile(sorted(run.singles.answer_seconds), 0.99) * 1000
    figure("sustained_event_to_score_p95_s", percentile(ranked, 0.95))
    figure("sustained_event_to_score_p99_s", percentile(ranked, 0.99))
    figure("sustained_backlog_oldest_max_s", max(monitor.backlog_age, default=float("nan")))
    figure("sustained_door_p99_ms", door_p99)


def automation_rows(run: Run) -> list[tuple[str, str]]:
    """The new users' webhooks: from the commit of the refresh that scored the user (its start,
    the payload's timestamp, plus its duration, as the monitor saw it) to the receiver, and
    from the track's 202."""
    assert run.new_users is not None
    tracked = run.new_users.tracked
    commits = {
        round(r.started.timestamp(), 3): r.started.timestamp() + r.seconds
        for r in run.monitor.refreshes
    }
    after_commit: list[float] = []
    after_202: list[float] = []
    delivered: set[str] = set()
    unmatched = 0
    for arrived, body in run.arrivals:
        user = (body.get("data") or {}).get("user", {}).get("tracking_id")
        if user not in tracked or user in delivered:
            continue
        delivered.add(user)
        after_202.append(arrived - tracked[user])
        stamp = datetime.fromisoformat(body["timestamp"]).timestamp()
        commit = commits.get(round(stamp, 3))
        if commit is None:
            unmatched += 1
        else:
            after_commit.append(arrived - commit)
    return [
        (
            "automation: new users tracked / delivered",
            f"{len(tracked):,} / {len(delivered):,} ({run.new_users.failed:,} not accepted)",
        ),
        (
            "  refresh commit -> webhook p50 / p95 / max (ms)",
            _quantiles(after_commit, (0.5, 0.95, 1.0)),
        ),
        (
            "  the track's 202 -> webhook p50 / p95 / max (ms)",
            _quantiles(after_202, (0.5, 0.95, 1.0)),
        ),
        ("  webhooks of a refresh the monitor missed", f"{unmatched:,}"),
    ]


# --- Main -----------------------------------------------------------------------------------------


def _asyncio_run(coroutine):
    """On uvloop, as the service's own server runs: the generator then costs less CPU."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def measure(args: argparse.Namespace) -> int:
    if not port_is_free(PORT):
        raise CouldNotMeasure(f"port {PORT} is busy; set BENCH_SUSTAINED_PORT")
    if args.reuse_database:
        print(f"on {DB_NAME} as an earlier run left it (--reuse-database)", flush=True)
    else:
        print(f"copying {TEMPLATE_DB} to {DB_NAME} ...", flush=True)
        print(f"copied in {database_copy():.0f} s", flush=True)
    data_dir = tempfile.mkdtemp(prefix="eds-bench-sustained-")
    env = production_env(
        database_url=DATABASE_URL,
        broker_url=BROKER_URL,
        DATA_DIR=data_dir,  # the metrics' files among it: counted from zero
        PROMETHEUS_MULTIPROC_DIR=os.path.join(data_dir, "metrics"),
        METRICS_TOKEN=METRICS_TOKEN,
        AUTOMATION_ALLOW_PRIVATE_URLS="true",
    )
    processes: list[Process] = []
    receiver: Receiver | None = None
    try:
        try:
            migrate(DATABASE_URL, env=env)
        except subprocess.CalledProcessError as exc:
            raise CouldNotMeasure("manage.py migrate failed (its errors are above)") from exc
        print("preparing: credentials, score history, a refresh ...", flush=True)
        if not args.no_automation:
            receiver = Receiver()
        product = prepare({**env, "BENCH_RECEIVER_URL": receiver.url if receiver else ""})
        print(f"prepared {product['product']!r}: {product['steps']}", flush=True)
        weights = product["weights"]
        weighted = sorted(name for name, weight in weights.items() if weight > 0)
        if not weighted:
            raise CouldNotMeasure("the seeded workspace weighs no event name")
        event = max(weighted, key=lambda name: (weights[name], name))
        planned = int(sampling_seconds(args.minutes * 60) * args.samples_per_second)
        users, subjects = people(product["product_id"], planned + 1)
        # The copy's and the refresh's writes checkpointed and synced first: the load should
        # not meet the gigabytes they left to write back.
        print(settle(), flush=True)
        clear_broker(BROKER_URL)
        print(machine(), flush=True)
        schedule_dir = os.path.join(data_dir, "beat")
        os.mkdir(schedule_dir)
        server = Process("uvicorn", uvicorn_command(2, PORT), env)
        processes.append(server)
        if args.read_server:
            processes.append(Process("read server", uvicorn_command(1, READ_PORT), env))
        for label, command in (
            ("worker", celery_worker_command(2, "--queues", "celery", "-n", "worker@%h")),
            (
                "automations",
                celery_worker_command(
                    4, "--queues", "automations", "--pool", "threads", "-n", "automations@%h"
                ),
            ),
            (
                "marketplace",
                celery_worker_command(1, "--queues", "marketplace", "-n", "marketplace@%h"),
            ),
            ("beat", celery_beat_command(schedule_dir)),
        ):
            processes.append(Process(label, command, env))
        wait_for_server(server, PORT)
        if args.read_server:
            wait_for_server(processes[1], READ_PORT)
        warmup = _asyncio_run(warm_up(product, event, weights[event], subjects[0]))
        print(f"warm-up sample scored {warmup * 1000:,.0f} ms after its 202", flush=True)
        for process in processes:
            if not process.running():
                raise CouldNotMeasure(f"{process.label} stopped:\n{process.output()}")
        print(
            f"sending {args.rate:,.0f} single calls and {args.batch_rate:g} batch of "
            f"{args.batch_size} a second for {args.minutes:g} min, "
            f"{args.samples_per_second:g} samples a second ...",
            flush=True,
        )
        run = _asyncio_run(
            measure_load(
                args,
                product=product,
                users=users,
                subjects=subjects[1:],
                weighted=weighted,
                event=event,
                groups={process.label: process.popen.pid for process in processes},
                receiver=receiver,
            )
        )
        for process in processes:
            if not process.running():
                raise CouldNotMeasure(
                    f"{process.label} stopped during the load:\n{process.output()}"
                )
        if not run.singles.statuses.get(202):
            raise CouldNotMeasure(f"no single call was accepted:\n{server.output()}")
        report(args, run, product, event)
        return 0
    finally:
        for process in reversed(processes):
            process.stop()
        if receiver is not None:
            receiver.stop()
        with contextlib.suppress(Exception):
            clear_broker(BROKER_URL)
        shutil.rmtree(data_dir, ignore_errors=True)
        if not args.keep_database:
            with contextlib.suppress(Exception):
                database_drop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench_freshness.py --sustained", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the load lasts")
    parser.add_argument("--rate", type=float, default=3000.0, help="single calls a second")
    parser.add_argument("--batch-rate", type=float, default=1.0, help="/v1/batch calls a second")
    parser.add_argument("--batch-size", type=int, default=100, help="messages a batch")
    parser.add_argument("--samples-per-second", type=float, default=2.0)
    parser.add_argument("--connections", type=int, default=64, help="the generator's at first")
    parser.add_argument(
        "--max-connections",
        type=int,
        default=1024,
        help="the generator opens more, up to this many, while none is free",
    )
    parser.add_argument("--sample-connections", type=int, default=16, help="the samplers'")
    parser.add_argument(
        "--automation-rate",
        type=float,
        default=1.0,
        help="tracks a second for new users, each firing a webhook once scored",
    )
    parser.add_argument(
        "--no-automation", action="store_true", help="no automation, no new users' tracks"
    )
    parser.add_argument(
        "--read-server",
        action="store_true",
        help=f"the samples read a second uvicorn (1 worker, port {READ_PORT}), as a deployment "
        "that routes the read API to processes of its own; the door's keep only the load",
    )
    parser.add_argument(
        "--keep-database", action="store_true", help=f"leave {DB_NAME} for a look afterwards"
    )
    parser.add_argument(
        "--reuse-database",
        action="store_true",
        help=f"run on the {DB_NAME} a --keep-database run left, not a new copy (quicker for "
        "trying the script; its figures then include that run's data)",
    )
    args = parser.parse_args(argv)
    args.minutes = min(max(args.minutes, 0.25), 60.0)
    args.batch_size = min(max(args.batch_size, 1), 2500)
    return measured(measure, args)


if __name__ == "__main__":
    sys.exit(main())
