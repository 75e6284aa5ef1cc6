"""Freshness benchmark: time from a 202 to the event being readable.

    .venv/bin/python bench/bench_freshness.py              # 30 s at 1,000 req/s (about 1.5 minutes)
    .venv/bin/python bench/bench_freshness.py --seconds 10 --rate 500

The production setup runs on 127.0.0.1: uvicorn (config.asgi, 2 workers, uvloop, httptools) for
the ingestion door and the read API, one Celery worker (prefork, 2 processes) and Celery beat, on
PostgreSQL and Redis. An asyncio load generator sends v2 track calls at a steady rate over a few
keep-alive connections, each for a new userId and with its own timestamp, paced by a schedule
(request i is due at start + i / rate). For every 50th 202 a poller asks the read API
(GET /v2/users?match_type=tracking_id) every 50 ms until that user is there with `last_seen`
equal to the event's time; the visibility latency runs from the 202 to that answer. After 10 s a
sample counts as a miss. The script makes and migrates its own database (eds_bench_fresh), uses
Redis db 10, stops every process it starts, and exits non-zero only when it could not measure.

    .venv/bin/python bench/bench_freshness.py --replica    # the read API on a streaming replica
    .venv/bin/python bench/bench_freshness.py --sustained  # event to score at a million users

With --replica the service runs on a temporary primary cluster and the read API (a separate
uvicorn) reads a streaming replica of it (bench/pg_clusters.py: two PostgreSQL servers on this
box, ports BENCH_REPLICA_PORTS, default 5440,5441), as docs/scaling.md's read replicas do; the
replica's replay lag is sampled on the primary while the calls are sent.

--sustained is another benchmark on the same pieces: the time from a 202 to a changed score at
the scoring benchmark's scale while the box takes 3,100 messages a second for 10 minutes
(bench/freshness_sustained.py; `make bench` runs it as bench/bench_sustained.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.databases import recreate_migrated_database  # noqa: E402 (after the path is set)
from bench.pg_clusters import (  # noqa: E402
    Cluster,
    ClusterError,
    ReplicaWatch,
    primary_and_replica,
)
from bench.targets import postgres_departures  # noqa: E402

BIN = ROOT / ".venv" / "bin"
PYTHON = str(BIN / "python")
PG_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
DB_NAME = os.environ.get("BENCH_FRESH_DB", "eds_bench_fresh")
BROKER_URL = os.environ.get("BENCH_FRESH_BROKER_URL", "redis://127.0.0.1:6379/10")
PORT = int(os.environ.get("BENCH_FRESH_PORT", "8700"))
HOST = "127.0.0.1"
START_SECONDS = 40  # for a server or the first event to come through
GIVE_UP_SECONDS = 10.0  # a sample not visible by then is a miss
TARGET_P95_SECONDS = 1.0
LATE_SECONDS = 30.0  # a server that cannot keep up: stop sending this long after schedule
REPLICA_PORTS_TEXT = os.environ.get("BENCH_REPLICA_PORTS", "5440,5441")
# The service's database: on this machine's server, or with --replica on a temporary primary,
# with the streaming replica the read API reads (set by measure before any process starts).
DATABASE = {"url": f"{PG_URL}/{DB_NAME}", "replica_url": ""}


class CouldNotMeasure(Exception):
    """The setup failed: no figure can be given."""


# --- Environment and processes -------------------------------------------------------------------


def service_env() -> dict[str, str]:
    return production_env(
        database_url=DATABASE["url"], replica_url=DATABASE["replica_url"], broker_url=BROKER_URL
    )


def production_env(
    *, database_url: str, broker_url: str, replica_url: str = "", **extra: str
) -> dict[str, str]:
    """The service's environment in production mode on these database and broker (read
    throttling off, so the pollers are never refused); `extra` adds or overrides settings."""
    static_root = Path(tempfile.gettempdir()) / "eds-bench-fresh-static"
    static_root.mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_ENV": "production",
            "SECRET_KEY": "bench-only-secret-key-not-for-production-use-0123456789",
            "FIELD_ENCRYPTION_SALT": "bench-only-salt",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DATABASE_URL": database_url,
            "DATABASE_REPLICA_URL": replica_url,
            "CELERY_BROKER_URL": broker_url,
            "CACHE_URL": broker_url,  # the shared cache of the README's production setup
            "READ_API_THROTTLE_RATE": "off",
            "STATIC_ROOT": str(static_root),
            "LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT),
            **extra,
        }
    )
    return env


def manage(*args: str) -> str:
    result = subprocess.run(
        [PYTHON, "manage.py", *args],
        cwd=ROOT,
        env=service_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise CouldNotMeasure(f"manage.py {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return result.stdout


def recreate_database() -> dict:
    """A fresh, migrated database with one product; returns create_product's JSON."""
    env = service_env()
    try:
        recreate_migrated_database(env["DATABASE_URL"], env=env)
    except subprocess.CalledProcessError as exc:
        raise CouldNotMeasure("manage.py migrate failed (its errors are above)") from exc
    return json.loads(manage("create_product", "Bench", "--json"))


def clear_broker(url: str = BROKER_URL) -> None:
    """Empty the bench's own Redis db (queued kicks of an earlier run)."""
    import redis

    redis.Redis.from_url(url).flushdb()


_SETTINGS_CODE = """
import json, django
django.setup()
from django.conf import settings
from ingestion import writer
sweep = settings.CELERY_BEAT_SCHEDULE["ingestion-sweep"]["schedule"]
print(json.dumps({"drain_batch": settings.INGESTION_DRAIN_BATCH,
                  "kick_interval": settings.INGESTION_WAKE_UP_MS / 1000,
                  "gather": writer.GATHER_SECONDS, "sweep": sweep}))
"""


def drain_settings() -> dict:
    result = subprocess.run(
        [PYTHON, "-c", _SETTINGS_CODE],
        cwd=ROOT,
        env=service_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0:
        raise CouldNotMeasure(f"could not read the settings:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


class Process:
    """One started process group (a server or worker and its children), stopped by its pid."""

    def __init__(self, label: str, command: list[str], env: dict[str, str] | None = None) -> None:
        self.label = label
        self.log = tempfile.TemporaryFile()
        self.popen = subprocess.Popen(
            command,
            cwd=ROOT,
            env=service_env() if env is None else env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopping it stops its children
        )

    def running(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-3000:]

    def stop(self) -> None:
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        # Children left behind (a prefork pool child, say) share the group: end them too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)


def uvicorn_command(workers: int, port: int = PORT) -> list[str]:
    return [
        str(BIN / "uvicorn"),
        "config.asgi:application",
        "--host",
        HOST,
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--no-access-log",
        "--log-level",
        "warning",
    ]


def celery_worker_command(concurrency: int, *options: str) -> list[str]:
    """A Celery worker; `options` adds the README's others (--queues, --pool, --hostname)."""
    return [
        str(BIN / "celery"),
        "-A",
        "config",
        "worker",
        "--loglevel",
        "WARNING",
        "--concurrency",
        str(concurrency),
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        *options,
    ]


def celery_beat_command(schedule_dir: str) -> list[str]:
    return [
        str(BIN / "celery"),
        "-A",
        "config",
        "beat",
        "--loglevel",
        "WARNING",
        "--schedule",  # unused by the database scheduler; kept out of the checkout anyway
        os.path.join(schedule_dir, "celerybeat-schedule"),
    ]


_TICKS = os.sysconf("SC_CLK_TCK")


def group_cpu_seconds(group: int) -> float:
    """User + system CPU time of every live process in a process group."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended meanwhile
        if int(fields[2]) == group:  # fields[2] is the process group id
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICKS


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((HOST, port)) != 0


# --- A minimal keep-alive HTTP/1.1 client on asyncio streams -------------------------------------


class HttpConnection:
    """One keep-alive connection to 127.0.0.1:`port`; reconnects after an error."""

    def __init__(self, port: int = PORT) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.used_at = 0.0  # time.monotonic() of the last answer

    def idle_seconds(self) -> float:
        return time.monotonic() - self.used_at

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(HOST, self.port)
        head = [f"{method} {path} HTTP/1.1", f"Host: {HOST}:{self.port}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        if body or method == "POST":
            head.append(f"Content-Length: {len(body)}")
        try:
            self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            answer = await self._response()
            self.used_at = time.monotonic()
            return answer
        except (OSError, asyncio.IncompleteReadError, ValueError):
            self.close()
            raise

    async def _response(self) -> tuple[int, bytes]:
        status_line = await self.reader.readuntil(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        length: int | None = None
        chunked = closing = False
        while True:
            line = await self.reader.readuntil(b"\r\n")
            if line == b"\r\n":
                break
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value:
                chunked = True
            elif name == "connection" and value == "close":
                closing = True
        if chunked:
            parts = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                parts.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            body = b"".join(parts)
        elif length is not None:
            body = await self.reader.readexactly(length)
        else:
            body = await self.reader.read()
            closing = True
        if closing:
            self.close()
        return status, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


# --- The measurement -----------------------------------------------------------------------------


@dataclass
class Figures:
    sent: int = 0
    accepted: int = 0
    refused: int = 0  # answered, but not 202
    errors: int = 0  # no answer (connection error)
    send_seconds: float = 0.0
    max_lag: float = 0.0  # how far behind its schedule the latest request went out
    answer_times: list[float] = field(default_factory=list)  # seconds from send to answer
    samples: int = 0
    latencies: list[float] = field(default_factory=list)  # 202 -> the answer that showed it
    # 202 -> the last poll that did not show it yet: the event became visible in between.
    not_before: list[float] = field(default_factory=list)
    misses: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # cores used while sending, by process
    wrong_last_seen: int = 0  # visible, but last_seen is not the event's time
    polls: int = 0
    poll_times: list[float] = field(default_factory=list)  # seconds per read API call
    poll_gaps: list[float] = field(default_factory=list)
    unsent: int = 0  # left unsent when the time bound ran out
    poll_errors: int = 0


def event_time(wall: float) -> tuple[str, datetime]:
    """The track call's timestamp (ISO 8601, milliseconds) and that instant."""
    moment = datetime.fromtimestamp(round(wall, 3), tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"), moment


class Freshness:
    def __init__(
        self,
        *,
        product: dict,
        rate: float,
        seconds: float,
        connections: int,
        sample_every: int,
        poll_interval: float,
        poll_connections: int,
        read_port: int = PORT,
    ) -> None:
        self.read_port = read_port
        self.product = product
        self.rate = rate
        self.seconds = seconds
        self.connections = connections
        self.sample_every = sample_every
        self.poll_interval = poll_interval
        self.poll_connections = poll_connections
        self.figures = Figures()
        self.run_tag = f"fr{int(time.time())}"
        self.track_headers = {
            "Content-Type": "application/json",
            "Authorization": f"Basic {product['ingestion_key']}",
        }
        self.read_headers = {"Authorization": f"Bearer {product['api_token']}"}
        self.pollers: set[asyncio.Task] = set()

    def track_body(self, user_id: str, timestamp: str) -> bytes:
        return json.dumps(
            {
                "userId": user_id,
                "event": "Report_Created",
                "timestamp": timestamp,
                "context": {"groupId": "acc_bench"},
            },
            separators=(",", ":"),
        ).encode()

    def users_path(self, user_id: str) -> str:
        query = urllib.parse.urlencode(
            {
                "workspace_id": self.product["workspace_id"],
                "match_type": "tracking_id",
                "match_value": user_id,
            }
        )
        return f"/v2/users?{query}"

    async def visible(
        self, pool: asyncio.Queue, user_id: str, moment: datetime
    ) -> tuple[bool | None, float]:
        """Whether the read API shows the user (True: with last_seen == moment; False: not yet;
        None: with another last_seen), and when the question was sent (time.monotonic)."""
        connection = await pool.get()
        asked_at = time.monotonic()
        try:
            self.figures.polls += 1
            status, body = await connection.request(
                "GET", self.users_path(user_id), self.read_headers
            )
            self.figures.poll_times.append(time.monotonic() - asked_at)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            self.figures.poll_errors += 1
            return False, asked_at
        finally:
            pool.put_nowait(connection)
        if status != 200:
            self.figures.poll_errors += 1
            return False, asked_at
        for user in json.loads(body).get("data", []):
            if user.get("tracking_id") == user_id:
                seen = user.get("last_seen")
                if seen and datetime.fromisoformat(seen.replace("Z", "+00:00")) == moment:
                    return True, asked_at
                return None, asked_at
        return False, asked_at

    async def wait_visible(
        self, pool: asyncio.Queue, user_id: str, moment: datetime, accepted_at: float
    ) -> tuple[float, float] | None:
        """Seconds from the 202 (`accepted_at`, monotonic) until the read API showed the user, and
        until the last poll that did not show it was sent (0 when the first one did)."""
        polls = 0
        last_miss = accepted_at
        while True:
            state, asked_at = await self.visible(pool, user_id, moment)
            now = time.monotonic()
            polls += 1
            done = state is None or state or now - accepted_at >= GIVE_UP_SECONDS
            if done:
                # How often this sample was actually looked at (a busy read API stretches it).
                self.figures.poll_gaps.append((now - accepted_at) / polls)
            if state is None:
                self.figures.wrong_last_seen += 1
                return None
            if state:
                return now - accepted_at, last_miss - accepted_at
            if done:
                return None
            last_miss = asked_at
            await asyncio.sleep(self.poll_interval)

    async def sample(self, pool: asyncio.Queue, user_id: str, moment: datetime, accepted_at: float):
        bounds = await self.wait_visible(pool, user_id, moment, accepted_at)
        if bounds is None:
            self.figures.misses += 1
        else:
            self.figures.latencies.append(bounds[0])
            self.figures.not_before.append(bounds[1])

    async def sender(self, lane: int, start: float, total: int, pool: asyncio.Queue) -> None:
        stop_by = start + self.seconds + LATE_SECONDS
        loop = asyncio.get_running_loop()
        connection = HttpConnection()
        figures = self.figures
        try:
            for i in range(lane, total, self.connections):
                if time.monotonic() > stop_by:
                    figures.unsent += len(range(i, total, self.connections))
                    break
                due = start + i / self.rate
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                else:
                    figures.max_lag = max(figures.max_lag, -wait)
                user_id = f"{self.run_tag}_u{i}"
                timestamp, moment = event_time(time.time())
                figures.sent += 1
                sent_at = time.monotonic()
                try:
                    status, _ = await connection.request(
                        "POST", "/v2/track", self.track_headers, self.track_body(user_id, timestamp)
                    )
                except (OSError, asyncio.IncompleteReadError, ValueError):
                    figures.errors += 1
                    continue
                figures.answer_times.append(time.monotonic() - sent_at)
                if status != 202:
                    figures.refused += 1
                    continue
                figures.accepted += 1
                if i % self.sample_every == 0:
                    figures.samples += 1
                    task = loop.create_task(self.sample(pool, user_id, moment, time.monotonic()))
                    self.pollers.add(task)
                    task.add_done_callback(self.pollers.discard)
        finally:
            connection.close()

    async def run(self) -> Figures:
        loop = asyncio.get_running_loop()
        pool: asyncio.Queue = asyncio.Queue()
        poll_connections = [HttpConnection(self.read_port) for _ in range(self.poll_connections)]
        for connection in poll_connections:
            pool.put_nowait(connection)
        total = int(self.rate * self.seconds)
        start = time.monotonic() + 0.2
        senders = [
            loop.create_task(self.sender(lane, start, total, pool))
            for lane in range(self.connections)
        ]
        await asyncio.gather(*senders)
        self.figures.send_seconds = time.monotonic() - start
        # Every sampler gives up GIVE_UP_SECONDS after its 202 at the latest.
        if self.pollers:
            await asyncio.wait(set(self.pollers), timeout=GIVE_UP_SECONDS + 5)
        for connection in poll_connections:
            connection.close()
        return self.figures


async def first_event_through(product: dict, timeout: float) -> float:
    """One track call, polled until readable: proves the pipeline works and warms it up."""
    probe = Freshness(
        product=product,
        rate=1,
        seconds=1,
        connections=1,
        sample_every=1,
        poll_interval=0.1,
        poll_connections=1,
    )
    connection = HttpConnection()
    pool: asyncio.Queue = asyncio.Queue()
    pool.put_nowait(HttpConnection())
    user_id = f"{probe.run_tag}_warmup"
    timestamp, moment = event_time(time.time())
    status, body = await connection.request(
        "POST", "/v2/track", probe.track_headers, probe.track_body(user_id, timestamp)
    )
    connection.close()
    if status != 202:
        raise CouldNotMeasure(f"the warm-up track call was answered {status}: {body[:500]!r}")
    accepted_at = time.monotonic()
    while time.monotonic() - accepted_at < timeout:
        state, _ = await probe.visible(pool, user_id, moment)
        if state:
            return time.monotonic() - accepted_at
        if state is None:
            raise CouldNotMeasure("the warm-up user is readable, but with the wrong last_seen")
        await asyncio.sleep(0.1)
    raise CouldNotMeasure(f"the warm-up event was not readable within {timeout:.0f} s")


def wait_for_server(server: Process, port: int = PORT) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if not server.running():
            break
        if not port_is_free(port):
            return
        time.sleep(0.2)
    raise CouldNotMeasure(f"uvicorn did not start:\n{server.output()}")


# --- Report --------------------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of sorted `values`."""
    if not values:
        return float("nan")
    rank = max(1, math.ceil(fraction * len(values)))
    return values[min(rank, len(values)) - 1]


def report(
    args: argparse.Namespace,
    figures: Figures,
    loads: tuple,
    settings: dict,
    watch: ReplicaWatch | None = None,
) -> None:
    latencies = sorted(figures.latencies)
    answers = sorted(figures.answer_times)
    polls = sorted(figures.poll_times)
    # A miss counts as slower than every visible sample: percentiles over all samples.
    ranked = latencies + [float("inf")] * (figures.samples - len(latencies))
    lower = sorted(figures.not_before) + [float("inf")] * (figures.samples - len(latencies))
    achieved = figures.sent / figures.send_seconds if figures.send_seconds else 0.0

    def ms(value: float) -> str:
        return "miss" if value == float("inf") else f"{value * 1000:,.0f}"

    rows = [
        ("offered rate (req/s)", f"{args.rate:,.0f}"),
        ("achieved rate (req/s)", f"{achieved:,.0f}"),
        ("duration (s)", f"{figures.send_seconds:.1f}"),
        ("track calls answered 202", f"{figures.accepted:,}"),
        ("not sent (behind schedule by 30 s)", f"{figures.unsent:,}"),
        ("answered other than 202", f"{figures.refused:,}"),
        ("connection errors", f"{figures.errors:,}"),
        (
            "track answer p50 / p99 (ms)",
            f"{percentile(answers, 0.5) * 1000:,.1f} / {percentile(answers, 0.99) * 1000:,.1f}",
        ),
        ("most behind schedule (ms)", f"{figures.max_lag * 1000:,.0f}"),
        (f"samples (every {args.sample_every}th 202)", f"{figures.samples:,}"),
        ("visibility p50 (ms)", ms(percentile(ranked, 0.50))),
        ("visibility p95 (ms)", ms(percentile(ranked, 0.95))),
        ("visibility p99 (ms)", ms(percentile(ranked, 0.99))),
        ("visibility max (ms)", ms(ranked[-1]) if ranked else "-"),
        (
            "  not yet visible at (p50 / p95 ms)",
            f"{ms(percentile(lower, 0.50))} / {ms(percentile(lower, 0.95))}",
        ),
        (f"misses (not right in {GIVE_UP_SECONDS:.0f} s)", f"{figures.misses:,}"),
        ("  of which visible with a wrong last_seen", f"{figures.wrong_last_seen:,}"),
        (
            "read API polls (errors)",
            f"{figures.polls:,} ({figures.poll_errors:,}), every {args.poll_ms} ms",
        ),
        (
            "a sample polled every (ms, mean)",
            f"{sum(figures.poll_gaps) / max(len(figures.poll_gaps), 1) * 1000:,.0f}",
        ),
        (
            "read API answer p50 / p99 (ms)",
            f"{percentile(polls, 0.5) * 1000:,.1f} / {percentile(polls, 0.99) * 1000:,.1f}",
        ),
        (
            "CPU while sending (cores)",
            ", ".join(f"{label} {cores:.2f}" for label, cores in figures.cpu.items()),
        ),
        ("load average 1 min: start / end", f"{loads[0]:.2f} / {loads[1]:.2f}"),
    ]
    if watch is not None:
        lags = sorted(watch.lag_seconds)
        rows.append(
            (
                f"replica replay lag p50 / p95 / max (ms, {len(lags)} samples)",
                " / ".join(ms(percentile(lags, q)) for q in (0.5, 0.95, 1.0)) if lags else "-",
            )
        )
        behind = max(watch.bytes_behind, default=0) / 1024
        rows.append(("replica most behind (kB)", f"{behind:,.0f}"))
        rows.append(("sessions on the replica (the read API's)", f"{watch.replica_sessions:,}"))
    print()
    print(f"{'freshness: v2 track 202 -> visible in GET /v2/users':<46} {'value':>14}")
    for label, value in rows:
        print(f"{label:<46} {value:>14}")
    print()
    print(
        f"worker drain: celery worker --concurrency {args.worker_concurrency} (prefork) + beat; "
        f"INGESTION_DRAIN_BATCH={settings['drain_batch']}, a kick per web process at most every "
        f"{settings['kick_interval'] * 1000:.0f} ms (INGESTION_WAKE_UP_MS), "
        f"sweep every {settings['sweep']:.0f} s; group commit window at most "
        f"{settings['gather'] * 1000:.0f} ms"
    )
    print(
        "read API polled on: "
        + (
            f"a separate uvicorn (1 worker, port {PORT + 1}) reading a streaming replica "
            f"(port {replica_ports()[1]}) of the primary (port {replica_ports()[0]})"
            if args.replica
            else f"a separate uvicorn (1 worker, port {PORT + 1}), not the ingest processes"
            if args.separate_read_server
            else f"the same uvicorn ({args.web_workers} workers) that takes the track calls"
        )
    )
    p95 = percentile(ranked, 0.95)
    verdict = "met" if p95 <= TARGET_P95_SECONDS else "NOT met"
    print(f"target p95 <= {TARGET_P95_SECONDS * 1000:.0f} ms at {args.rate:,.0f} req/s: {verdict}")
    if achieved < 0.95 * args.rate:
        print(
            f"the offered rate was not sustained: these figures are for about {achieved:,.0f} "
            "req/s (see the track answer times and CPU above)"
        )
    if loads[0] > 1.0 or loads[1] > 2.5:
        print("(other jobs share the cores: the load average includes them)")


def machine() -> str:
    with open("/proc/meminfo") as meminfo:
        mem_gib = int(meminfo.readline().split()[1]) / 1024 / 1024
    rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    departures = postgres_departures()
    if departures is None:
        settings = ""
    else:
        settings = f" ({', '.join(departures) or 'Debian defaults'})"
    return (
        f"{os.cpu_count()} cores, {mem_gib:.0f} GiB; load generator, uvicorn, Celery, PostgreSQL"
        f"{settings} and Redis on one box; git {rev or '?'}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


def replica_ports() -> tuple[int, int]:
    """BENCH_REPLICA_PORTS: the primary's port and the replica's, as "5440,5441"."""
    parts = REPLICA_PORTS_TEXT.split(",")
    if len(parts) != 2 or not all(part.strip().isdigit() for part in parts):
        raise CouldNotMeasure(
            f"BENCH_REPLICA_PORTS={REPLICA_PORTS_TEXT!r}: give two ports, as 5440,5441"
        )
    return int(parts[0]), int(parts[1])


def measure(args: argparse.Namespace) -> int:
    if not args.replica:
        return measure_on(args, None)
    ports = replica_ports()
    for port in ports:
        if not port_is_free(port):
            raise CouldNotMeasure(f"port {port} is busy; set BENCH_REPLICA_PORTS")
    print("starting a primary and its streaming replica ...", flush=True)
    try:
        with primary_and_replica(ports=ports) as (primary, replica):
            DATABASE.update(url=primary.url(DB_NAME), replica_url=replica.url(DB_NAME))
            return measure_on(args, (primary, replica))
    except ClusterError as exc:
        raise CouldNotMeasure(str(exc)) from exc


def measure_on(args: argparse.Namespace, clusters: tuple[Cluster, Cluster] | None) -> int:
    """The run, on DATABASE; `clusters`: the temporary primary and the replica the read API
    reads (--replica), the replay lag and both servers' CPU measured while sending."""
    read_port = PORT + 1 if args.separate_read_server else PORT
    for port in {PORT, read_port}:
        if not port_is_free(port):
            raise CouldNotMeasure(f"port {port} is busy; set BENCH_FRESH_PORT")
    print(f"setting up {DB_NAME} ...", flush=True)
    product = recreate_database()
    clear_broker()
    settings = drain_settings()
    print(machine(), flush=True)
    processes: list[Process] = []
    schedule_dir = tempfile.mkdtemp(prefix="eds-bench-fresh-")
    try:
        server = Process("uvicorn", uvicorn_command(args.web_workers))
        processes.append(server)
        processes.append(Process("worker", celery_worker_command(args.worker_concurrency)))
        processes.append(Process("beat", celery_beat_command(schedule_dir)))
        wait_for_server(server)
        if args.separate_read_server:
            reader = Process("read server", uvicorn_command(1, read_port))
            processes.append(reader)
            wait_for_server(reader, read_port)
        warmup = asyncio.run(first_event_through(product, START_SECONDS))
        print(f"first event readable {warmup * 1000:.0f} ms after its 202 (warm-up)", flush=True)
        for process in processes:
            if not process.running():
                raise CouldNotMeasure(f"{process.label} stopped:\n{process.output()}")
        load_start = os.getloadavg()[0]
        print(
            f"sending {args.rate:,.0f} req/s for {args.seconds:.0f} s over {args.connections} "
            f"connections (load average {load_start:.2f}) ...",
            flush=True,
        )
        freshness = Freshness(
            product=product,
            rate=args.rate,
            seconds=args.seconds,
            connections=args.connections,
            sample_every=args.sample_every,
            poll_interval=args.poll_ms / 1000,
            poll_connections=args.poll_connections,
            read_port=read_port,
        )
        groups = {process.label: process.popen.pid for process in processes}
        cpu_before = {label: group_cpu_seconds(pid) for label, pid in groups.items()}
        cpu_before["load generator"] = own_cpu_seconds()
        servers = dict(zip(("primary", "replica"), clusters, strict=True)) if clusters else {}
        cpu_before.update({label: server.cpu_seconds() for label, server in servers.items()})
        watch = ReplicaWatch(*clusters, DB_NAME) if clusters else None
        with watch or contextlib.nullcontext():
            figures = asyncio.run(freshness.run())
        load_end = os.getloadavg()[0]
        cpu_after = {label: group_cpu_seconds(pid) for label, pid in groups.items()}
        cpu_after["load generator"] = own_cpu_seconds()
        cpu_after.update({label: server.cpu_seconds() for label, server in servers.items()})
        figures.cpu = {
            label: (cpu_after[label] - cpu_before[label]) / figures.send_seconds
            for label in cpu_after
        }
        if figures.accepted == 0 or figures.samples == 0:
            raise CouldNotMeasure(
                f"no track call was accepted ({figures.refused} refused, {figures.errors} errors)"
                f"\n{server.output()}"
            )
        report(args, figures, (load_start, load_end), settings, watch)
        return 0
    finally:
        for process in reversed(processes):
            process.stop()
        with contextlib.suppress(OSError):
            for name in os.listdir(schedule_dir):
                os.unlink(os.path.join(schedule_dir, name))
            os.rmdir(schedule_dir)
        with contextlib.suppress(Exception):
            clear_broker()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--sustained" in argv:
        # Its own options and setup: the scoring scale under a mixed load (issue 75).
        from bench.freshness_sustained import main as sustained_main

        return sustained_main([arg for arg in argv if arg != "--sustained"])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="track calls per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to send (max 120)")
    parser.add_argument("--connections", type=int, default=16, help="keep-alive connections")
    parser.add_argument("--sample-every", type=int, default=50, help="poll for every Nth 202")
    parser.add_argument("--poll-ms", type=int, default=50, help="read API poll interval")
    parser.add_argument("--poll-connections", type=int, default=8, help="read API connections")
    parser.add_argument("--web-workers", type=int, default=2, help="uvicorn worker processes")
    parser.add_argument("--worker-concurrency", type=int, default=2, help="Celery processes")
    parser.add_argument(
        "--separate-read-server",
        action="store_true",
        help="poll a second uvicorn (1 worker, next port): reads apart from ingestion",
    )
    parser.add_argument(
        "--replica",
        action="store_true",
        help="run on a temporary primary; the read server reads its streaming replica",
    )
    parser.add_argument(
        "--sustained",
        action="store_true",
        help="event to score at the scoring scale under a sustained mixed load "
        "(bench/freshness_sustained.py; its options: --sustained --help)",
    )
    args = parser.parse_args(argv)
    args.separate_read_server = args.separate_read_server or args.replica
    args.seconds = min(max(args.seconds, 1.0), 120.0)
    args.rate = min(max(args.rate, 1.0), 20_000.0)
    return measured(measure, args)


def measured(measure_with: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """`measure_with(args)`'s exit code; 2 when it could not measure, 130 when stopped from
    outside (make bench interrupted: unwound, so every started process is stopped)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return measure_with(args)
    except CouldNotMeasure as exc:
        print(f"could not measure: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: every started process was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
