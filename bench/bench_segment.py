"""Segment-family benchmark: accepting SDK batches, and draining them with messageId dedup.

    .venv/bin/python bench/bench_segment.py

Uses its own PostgreSQL database (BENCH_SEGMENT_DATABASE_URL, default eds_bench_seg on
127.0.0.1), created and migrated here. Measures, on this machine:
- the acceptance rules (`ingestion.acceptance.accept`) on a 2,500-item batch as
  segment-analytics-python sends it, plain and gzip-encoded: batches/s and items/s (CPU only,
  no storage);
- draining a backlog of such batches (one stored row per batch) with `accepted_requests_drain`:
  messages applied per second with unique messageIds, then the same backlog posted again
  (every message a repeat), then single v2 calls without messageId for comparison.
Prints a table; exits 1 when it could not measure.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.databases import ensure_migrated_database  # noqa: E402 (after the path is set)

DATABASE_URL = os.environ.get(
    "BENCH_SEGMENT_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/eds_bench_seg"
)
BATCH_ITEMS = 2500
BACKLOG_BATCHES = 40  # 100,000 messages
SINGLE_CALLS = 20_000


def ensure_database() -> None:
    ensure_migrated_database(DATABASE_URL)


def sdk_batch(user_count: int = 500) -> dict:
    """2,500 messages shaped like segment-analytics-python's: tracks, pages and identifies."""
    items = []
    for i in range(BATCH_ITEMS):
        user = f"usr_{i % user_count}"
        common = {
            "integrations": {},
            "anonymousId": None,
            "timestamp": "2026-01-05T10:00:00.000+00:00",
            "context": {"library": {"name": "analytics-python", "version": "2.4.0"}},
            "userId": user,
            "messageId": str(uuid.uuid4()),
        }
        if i % 10 == 0:
            items.append({**common, "type": "identify", "traits": {"plan": "pro", "seat": i}})
        elif i % 5 == 0:
            items.append({**common, "type": "page", "name": "Docs", "properties": {"p": i}})
        else:
            common["context"]["groupId"] = f"acct_{i % 50}"
            items.append({**common, "type": "track", "event": f"Event_{i % 20}", "properties": {}})
    return {"batch": items, "sentAt": "2026-01-05T10:00:01+00:00", "writeKey": "k"}


def main() -> int:
    ensure_database()
    os.environ["DATABASE_URL"] = DATABASE_URL
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.utils import timezone

    from engagement.models import Event, Product
    from engagement.services import product_create
    from ingestion import acceptance
    from ingestion.models import AcceptedRequest, SeenMessage
    from ingestion.services.drain import accepted_requests_drain
    from ingestion.services.keys import ingestion_key_create
    from ingestion.store import store_accepted

    rows: list[tuple[str, str, str]] = []
    limits = acceptance.Limits(single=32 * 1024, batch=512 * 1024)
    body = sdk_batch()
    raw = json.dumps(body).encode()
    if len(raw) > limits.batch:
        body["batch"] = body["batch"][: BATCH_ITEMS * limits.batch // len(raw) - 10]
        raw = json.dumps(body).encode()
    items = len(body["batch"])
    packed = gzip.compress(raw)
    now_ms = int(time.time() * 1000)
    for label, payload, encoding in (("plain", raw, None), ("gzip", packed, "gzip")):
        runs = 20
        started = time.perf_counter()
        for _ in range(runs):
            acceptance.accept(
                "v1/batch",
                payload,
                authorization=None,
                content_encoding=encoding,
                now_ms=now_ms,
                limits=limits,
            )
        per_batch = (time.perf_counter() - started) / runs
        rows.append(
            (
                f"acceptance.accept, {items:,}-item batch ({label}, {len(payload) // 1024} KiB)",
                f"{per_batch * 1000:.1f} ms/batch",
                f"{items / per_batch:,.0f} items/s on one core",
            )
        )

    AcceptedRequest.objects.all().delete()
    Product.objects.filter(name__startswith="bench-segment").delete()
    product, _ = product_create(name=f"bench-segment-{uuid.uuid4().hex[:6]}")
    key = ingestion_key_create(product_id=product.id).key

    def backlog_of_batches() -> list[acceptance.Outcome]:
        outcomes = []
        for _ in range(BACKLOG_BATCHES):
            batch = sdk_batch()
            batch["writeKey"] = key
            outcomes.append(
                acceptance.accept(
                    "v1/batch",
                    json.dumps(batch).encode(),
                    authorization=None,
                    content_encoding=None,
                    now_ms=int(time.time() * 1000),
                    limits=acceptance.Limits(single=32 * 1024, batch=2 * 1024 * 1024),
                )
            )
        return outcomes

    def store(outcomes: list[acceptance.Outcome]) -> int:
        for outcome in outcomes:
            store_accepted(outcome.accepted, received_at=timezone.now())
        return sum(len(a.messages) for o in outcomes for a in o.accepted)

    def drain_all() -> tuple[float, int]:
        started = time.perf_counter()
        drains = 0
        while accepted_requests_drain(limit=1000).requests:
            drains += 1
        return time.perf_counter() - started, drains

    outcomes = backlog_of_batches()
    messages = store(outcomes)
    events_before = Event.objects.filter(product=product).count()
    seconds, drains = drain_all()
    applied = Event.objects.filter(product=product).count() - events_before
    rows.append(
        (
            f"drain {BACKLOG_BATCHES} batches = {messages:,} messages, unique messageIds",
            f"{messages / seconds:,.0f} messages/s",
            f"{seconds:.1f} s, {drains} drains, {applied:,} events",
        )
    )
    seen = SeenMessage.objects.filter(product=product).count()
    messages = store(outcomes)  # the SDK retried every batch
    seconds, drains = drain_all()
    repeated = Event.objects.filter(product=product).count() - events_before - applied
    rows.append(
        (
            "drain the same backlog again (every message a repeat)",
            f"{messages / seconds:,.0f} messages/s",
            f"{seconds:.1f} s, {repeated} events added, {seen:,} ids remembered",
        )
    )

    started = time.perf_counter()
    for i in range(SINGLE_CALLS):
        outcome = acceptance.accept(
            "v2/track",
            json.dumps({"userId": f"usr_{i % 500}", "event": "Login"}).encode(),
            authorization=f"Basic {key}",
            content_encoding=None,
            now_ms=int(time.time() * 1000),
            limits=limits,
        )
        AcceptedRequest.objects.bulk_create(
            [
                AcceptedRequest(
                    received_at=timezone.now(),
                    endpoint=a.endpoint,
                    key_digest=a.key_digest,
                    messages=a.messages,
                )
                for a in outcome.accepted
            ]
        )
    seconds, drains = drain_all()
    rows.append(
        (
            f"drain {SINGLE_CALLS:,} single v2 calls (no messageId), for comparison",
            f"{SINGLE_CALLS / seconds:,.0f} messages/s",
            f"{seconds:.1f} s, {drains} drains",
        )
    )

    if repeated != 0 or applied == 0:
        print(f"dedup did not hold: {applied} applied, {repeated} repeats added")
        return 1
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'figure':>22}  notes")
    for name, figure, note in rows:
        print(f"{name:<{width}}  {figure:>22}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
