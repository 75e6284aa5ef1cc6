"""How fast can any worker drain single calls on this machine? The floor under 50,000 events/s.

The same backlog as `bench_ingest.py --drain-only --backlog 300000` (300,000 accepted v2 calls of
one message each, with a messageId), drained by bare SQL with no Python per event and no Django:
each step below adds one write that applying an event cannot do without, in 40,000-message
transactions (the drain's default on PostgreSQL; BENCH_FLOOR_BATCH), committed without waiting
for the disk as the drain does. The full apply (`bench_ingest.py --drain-only`) also locks and
updates users, looks up accounts and adds to rollups, so it cannot beat the last line here.

    .venv/bin/python bench/bench_drain_floor.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import bench_ingest  # noqa: E402

# The drain's default on PostgreSQL (INGESTION_DRAIN_BATCH), and the backlog of bench_ingest.py's
# drain figures in docs/scaling.md.
BATCH = int(os.environ.get("BENCH_FLOOR_BATCH", "40000"))
BACKLOG = int(os.environ.get("BENCH_FLOOR_BACKLOG", "300000"))

_SETUP = [
    "CREATE TEMP TABLE claimed (id bigint, key_digest text, messages jsonb) ON COMMIT DELETE ROWS",
    "CREATE TEMP TABLE staged (product bigint, message_id text, user_tid text, name text, "
    "ms bigint) ON COMMIT DELETE ROWS",
]
_CLAIM = """INSERT INTO claimed SELECT id, key_digest, messages FROM ingestion_acceptedrequest
    ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED"""
_EXPAND = """INSERT INTO staged
    SELECT k.product_id, m->>'messageId', m->>'userId', m->>'event', (m->>'timestamp')::bigint
    FROM claimed c JOIN ingestion_ingestionkey k ON k.digest = c.key_digest,
         jsonb_array_elements(c.messages) m
    WHERE m->>'type' = 'track'"""
_DELETE = "DELETE FROM ingestion_acceptedrequest WHERE id IN (SELECT id FROM claimed)"
_EVENTS = """INSERT INTO engagement_event (product_id, user_id, account_id, name, timestamp)
    SELECT product, 1, NULL, name, 'epoch'::timestamptz + ms * interval '1 millisecond'
    FROM staged"""
_SEEN = """INSERT INTO ingestion_seenmessage (message_key, product_id, message_id, seen_at)
    SELECT DISTINCT md5(product::text || ':' || message_id)::uuid, product, message_id, now()
    FROM staged ORDER BY 1
    ON CONFLICT (message_key) DO NOTHING"""

STEPS = [
    ("claim the rows, read their JSON, delete them", [_CLAIM, _EXPAND, _DELETE]),
    ("+ store each event (raw events table)", [_CLAIM, _EXPAND, _EVENTS, _DELETE]),
    ("+ record each messageId (deduplication)", [_CLAIM, _EXPAND, _SEEN, _EVENTS, _DELETE]),
]


def drain(statements: list[str]) -> tuple[int, float]:
    url = f"{bench_ingest.PG_URL}/{bench_ingest.DB_NAME}"
    with psycopg.connect(url) as conn:
        conn.execute("SET synchronous_commit = off")
        for statement in _SETUP:
            conn.execute(statement)
        conn.commit()
        started = time.monotonic()
        drained = 0
        while True:
            with conn.transaction():
                for statement in statements:
                    cursor = conn.execute(statement, {"batch": BATCH})
                    if statement is _DELETE:
                        deleted = cursor.rowcount
            drained += deleted
            if not deleted:
                return drained, time.monotonic() - started


def main() -> int:
    key = bench_ingest.recreate_database()  # first: machine() asks the database its version
    print(bench_ingest.machine())
    print(f"load average at start: {bench_ingest.load_average():.2f}")
    print(f"{'what a drain does':<50} {'events/s':>10}")
    for label, statements in STEPS:
        bench_ingest.sql("TRUNCATE ingestion_seenmessage, engagement_event")
        bench_ingest.fill_backlog(key, BACKLOG)  # ends with a CHECKPOINT, as before each drain
        drained, seconds = drain(statements)
        print(f"{label:<50} {drained / seconds:>10,.0f}", flush=True)
    print(f"load average at end: {bench_ingest.load_average():.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
