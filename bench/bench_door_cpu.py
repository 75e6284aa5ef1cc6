"""CPU cost of the ASGI door alone: one v2 track through `IngestionFrontDoor`, no server, no
database (a writer that stores nothing), microseconds per request, the writing of its counts to
the metrics' files included.

    .venv/bin/python bench/bench_door_cpu.py                 # this tree
    .venv/bin/python bench/bench_door_cpu.py --tree /old     # another checkout, same venv

Production settings (DJANGO_ENV=production, ALLOWED_HOSTS=127.0.0.1) so the host check runs as it
does in production. Prints the best of five rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from targets import figure  # noqa: E402 (after the path is set)

ROUNDS, REQUESTS = 5, 20_000
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
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
