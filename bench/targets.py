"""The figures `make bench` holds to a target (issue 33), and the CPU reference beside them.

A benchmark reports each such figure with `figure(key, value)`: one line `FIGURE <key> <value>`
with the target and whether it was met, which bench/run.py collects from every script it runs
and lists at the end beside the CPU reference measured before and after the run. A script that
ran without reporting one of its figures could not measure it: run.py then exits non-zero.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass

PREFIX = "FIGURE "


@dataclass(frozen=True, slots=True)
class Target:
    script: str  # the bench script (stem) that measures it
    label: str
    unit: str
    at_most: float | None = None
    at_least: float | None = None

    def met(self, value: float) -> bool:
        if self.at_most is not None:
            return value <= self.at_most
        return self.at_least is None or value >= self.at_least

    def bound(self) -> str:
        if self.at_most is not None:
            return f"<= {self.at_most:,g} {self.unit}"
        return f">= {self.at_least:,g} {self.unit}"


TARGETS: dict[str, Target] = {
    "door_cpu_us": Target("bench_door_cpu", "door CPU per v2 track", "us", at_most=12),
    "door_vs_django": Target(
        "bench_ingest", "ASGI door, v2 track / Django as deployed", "x", at_least=3
    ),
    "door_vs_lean_door": Target(
        "bench_ingest", "ASGI door, v2 track / lean durable door", "x", at_least=0.9
    ),
    "drain_events_per_s": Target(
        "bench_ingest", "drain, single calls, one process", "events/s", at_least=60_000
    ),
    "rescore_never_scored_s": Target(
        "bench_scoring", "full rescore, never scored", "s", at_most=30
    ),
    "rescore_unchanged_s": Target(
        "bench_scoring", "full rescore, nothing changed", "s", at_most=30
    ),
    "rescore_weight_changed_s": Target(
        "bench_scoring", "full rescore, a weight changed", "s", at_most=30
    ),
    "incremental_refresh_s": Target("bench_scoring", "incremental refresh", "s", at_most=2),
    "history_full_s": Target("bench_history", "score history, full build", "s", at_most=120),
    "history_backfill_s": Target(
        "bench_history", "score history, backfill of one day", "s", at_most=30
    ),
    "history_daily_s": Target("bench_history", "score history, daily step", "s", at_most=15),
    "overview_cold_p95_ms": Target(
        "bench_dashboard", "dashboard overview, cache cold, p95", "ms", at_most=300
    ),
    # Issue 75: 1M users, 3,000 single calls and a 100-message batch a second for 10 minutes.
    "sustained_event_to_score_p95_s": Target(
        "bench_sustained", "sustained load: event to score, p95", "s", at_most=2
    ),
    "sustained_event_to_score_p99_s": Target(
        "bench_sustained", "sustained load: event to score, p99", "s", at_most=5
    ),
    "sustained_backlog_oldest_max_s": Target(
        "bench_sustained", "sustained load: backlog's oldest, max", "s", at_most=2
    ),
    "sustained_door_p99_ms": Target(
        "bench_sustained", "sustained load: door answer, p99", "ms", at_most=20
    ),
}


def figure(key: str, value: float) -> None:
    """Print one figure with its target, in the line bench/run.py collects."""
    target = TARGETS[key]
    verdict = "met" if target.met(value) else "MISSED"
    print(
        f"{PREFIX}{key} {value:.6g} ({target.label}: {value:,.2f} {target.unit}; "
        f"target {target.bound()}: {verdict})",
        flush=True,
    )


def parsed(line: str) -> tuple[str, float] | None:
    """(key, value) of a FIGURE line, None for any other line."""
    if not line.startswith(PREFIX):
        return None
    key, value = line[len(PREFIX) :].split()[:2]
    return key, float(value)


def cpu_reference() -> dict[str, float]:
    """A fixed amount of work timed now (best of five, ms), so that figures taken on other
    boxes or in other hours can be read against the CPU they had: Python (hashing and JSON, as
    the door does) and, when it answers, PostgreSQL (a scan and an aggregate of 3M rows)."""
    payload = json.dumps({"userId": "usr_1042", "event": "Report_Created", "n": list(range(20))})

    def python_work() -> None:
        for n in range(40_000):
            hashlib.sha256(f"{payload}{n}".encode()).digest()
            json.loads(payload)

    reference = {"python_ms": _best_of_five(python_work)}
    try:
        with _postgres() as connection:
            query = "SELECT count(*) FROM generate_series(1, 3000000) g WHERE g % 7 = 0"
            reference["postgres_ms"] = _best_of_five(lambda: connection.execute(query).fetchone())
    except Exception as error:  # noqa: BLE001 (a reference without PostgreSQL is still one)
        print(f"CPU reference: PostgreSQL not measured ({error})")
    return reference


def settle(*, idle_share: float = 0.9, longest_s: float = 90.0) -> str:
    """Let the machine finish what the previous script left before the next one measures.

    A script that writes gigabytes (bench_history's points) leaves PostgreSQL's checkpointer
    spreading their pages over the next minutes (checkpoint_completion_target) and the kernel
    writing them back; the next script would measure beside that work. So: a CHECKPOINT (done
    at once, not spread), the kernel's dirty pages synced, then seconds until the CPUs are
    `idle_share` idle over one second, at most `longest_s`. Says what it did, so a figure read
    after it is known to have started on an idle machine (the one-minute load average that
    bench_ingest prints still remembers the previous script for a minute or two)."""
    started = time.monotonic()
    try:
        with _postgres() as connection:
            connection.execute("CHECKPOINT")
    except Exception as error:  # noqa: BLE001 (the figures stand without it, and say so)
        print(f"settle: no CHECKPOINT ({error})")
    os.sync()
    idle = cpu_idle_share()
    while idle < idle_share and time.monotonic() - started < longest_s:
        idle = cpu_idle_share()
    return f"settled in {time.monotonic() - started:.0f} s (CPUs {idle:.0%} idle)"


def cpu_idle_share(seconds: float = 1.0) -> float:
    """The share of the CPUs' time spent idle over the next `seconds` (Linux's /proc/stat)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields)  # idle + iowait, all

    idle_before, total_before = sample()
    time.sleep(seconds)
    idle_after, total_after = sample()
    return (idle_after - idle_before) / max(1, total_after - total_before)


# The PostgreSQL settings the targets assume (issue 33: "Debian's default PostgreSQL settings"):
# Debian's postgresql.conf sets shared_buffers and max_wal_size; the rest are the server's own
# defaults. A machine's image may change some (one VM's conf.d turned autovacuum off: dead score
# rows then pile up between rescores and the dashboard reads them), so the summary names them.
DEBIAN_DEFAULTS = {
    "shared_buffers": "128MB",
    "max_wal_size": "1GB",
    "checkpoint_timeout": "5min",
    "autovacuum": "on",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "wal_compression": "off",
    "work_mem": "4MB",
    "max_parallel_workers_per_gather": "2",
    "jit": "on",
}


def postgres_departures() -> list[str] | None:
    """The settings of DEBIAN_DEFAULTS this server has otherwise, each as "name value (where
    it is set)"; None when PostgreSQL does not answer."""
    try:
        with _postgres() as connection:
            settings = connection.execute(
                "SELECT name, current_setting(name), coalesce(sourcefile, source) "
                "FROM pg_settings WHERE name = ANY(%s) ORDER BY name",
                (list(DEBIAN_DEFAULTS),),
            ).fetchall()
        return [
            f"{name} {value} ({where})"
            for name, value, where in settings
            if value != DEBIAN_DEFAULTS[name]
        ]
    except Exception as error:  # noqa: BLE001 (the figures stand without this line)
        print(f"PostgreSQL settings not read ({error})")
        return None


def _postgres():
    """A connection to the benchmarks' PostgreSQL server (BENCH_PG_SERVER), its `postgres`
    database."""
    import psycopg

    server = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
    return psycopg.connect(f"{server}/postgres", connect_timeout=3)


def _best_of_five(work) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        work()
        best = min(best, (time.perf_counter() - started) * 1000)
    return best
