"""CPU cost of the ASGI door alone: one v2 track through `IngestionFrontDoor`, no server, no
database (a writer that stores nothing), microseconds per request, the writing of its counts to
the metrics' files included.

    .venv/bin/python bench/bench_door_cpu.py                 # this tree
    .venv/bin/python bench/bench_door_cpu.py --tree /old     # another checkout, same venv
    .venv/bin/python bench/bench_door_cpu.py --instructions  # instructions, under valgrind

Production settings (DJANGO_ENV=production, ALLOWED_HOSTS=127.0.0.1) so the host check runs as it
does in production. Prints the best of five rounds.

A VM's speed can drift by half within minutes, more than a change to the door moves its time, so
`--instructions` counts instead what valgrind's callgrind counts (the same figure run after run,
whatever the machine is doing): the process run with the warm-up alone, then with
COUNTED_REQUESTS more, the difference divided by COUNTED_REQUESTS. Instructions are not time (a
cache miss costs more than an add), but a change that removes instructions removes time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from targets import figure  # noqa: E402 (after the path is set)

ROUNDS, REQUESTS = 5, 20_000
COUNTED_REQUESTS = 5_000  # under valgrind: an exact count, run 50 times slower
BODY = b'{"userId":"usr_1042","event":"Report_Created","context":{"groupId":"acc_17"}}'
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"user-agent", b"wrk"),
    (b"content-type", b"application/json"),
    (b"content-length", str(len(BODY)).encode()),
    (b"authorization", b"Basic bench-key-0123456789abcdefghijklmnopqrstuv"),
]


class NoWriter:
    async def store(self, entries) -> None:
        return None


async def run(door, count: int) -> None:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v2/track",
        "raw_path": b"/v2/track",
        "query_string": b"",
        "headers": HEADERS,
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
    }

    async def receive() -> dict:
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(message) -> None:
        return None

    for _ in range(count):
        await door(scope, receive, send)


def instructions(tree: Path, requests: int) -> int:
    """Instructions callgrind counts in a run of this script that sends `requests` after the
    warm-up (`--requests`)."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={scratch}/callgrind.out",
            sys.executable,
            __file__,
            "--tree",
            str(tree),
            "--requests",
            str(requests),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    collected = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or collected is None:
        sys.exit(f"valgrind could not count the door's instructions:\n{done.stderr[-2000:]}")
    return int(collected.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions under valgrind"
    )
    parser.add_argument("--requests", type=int, help=argparse.SUPPRESS)  # valgrind's runs
    args = parser.parse_args()
    if args.instructions:
        if shutil.which("valgrind") is None:
            sys.exit("--instructions needs valgrind (apt-get install -y valgrind)")
        counted = instructions(args.tree, COUNTED_REQUESTS) - instructions(args.tree, 0)
        per_request = counted / COUNTED_REQUESTS
        print(f"{args.tree}: {per_request:,.0f} instructions per v2 track in the ASGI door")
        return 0
    os.chdir(args.tree)
    sys.path.insert(0, str(args.tree))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DJANGO_ENV="production",
        SECRET_KEY="bench-only-" + "x" * 40,
        FIELD_ENCRYPTION_SALT="bench-only-salt",
        ALLOWED_HOSTS="127.0.0.1",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/unused",
        CELERY_BROKER_URL="redis://127.0.0.1:6379/0",
    )
    import django

    django.setup()
    from ingestion.asgi import IngestionFrontDoor

    door = IngestionFrontDoor(None, writer=NoWriter())
    # The door's answers are counted in the process and written to the metrics' files by a
    # timer (config.metrics); that write is part of the cost, so each round ends with it. (An
    # older tree, given with --tree, wrote each count as it went.)
    from config import metrics

    counts_flush = getattr(metrics, "door_answer_counts_flush", lambda: None)
    asyncio.run(run(door, 2_000))  # warm up
    counts_flush()
    if args.requests is not None:
        if args.requests:
            asyncio.run(run(door, args.requests))
            counts_flush()
        return 0
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.process_time()
        asyncio.run(run(door, REQUESTS))
        counts_flush()
        best = min(best, (time.process_time() - started) / REQUESTS * 1e6)
    print(f"{args.tree}: {best:.1f} us of CPU per v2 track in the ASGI door (best of {ROUNDS})")
    figure("door_cpu_us", best)
    return 0


if __name__ == "__main__":
    sys.exit(main())
