"""Acceptance micro-benchmark: CPU cost per message of `acceptance.accept`.

    .venv/bin/python bench/bench_core.py                      # the project's ingestion/acceptance
    .venv/bin/python bench/bench_core.py --against OTHER.py   # and an older core.py, side by side

No server, no database: only the framework-free acceptance rules (read, parse, authenticate,
validate, strip) on one core of this machine. Bodies:
- /v1/batch with 100 and with 2,500 messages shaped as segment-analytics-python sends them
  (tracks, pages and identifies with context, properties, integrations, messageId), plain and gzip;
- /v1/batch with 100 small tracks (the body bench_ingest.py sends through wrk);
- one v2 track (the ~80-byte wrk body of bench_ingest.py).
Each figure is the best of several timed rounds of process CPU time (microseconds per message),
so other jobs on the machine shift it less. Exits 1 when it could not measure (a body not
accepted as expected).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROUND_SECONDS = 0.4
ROUNDS = 5
TRACK_BODY = b'{"userId":"usr_1042","event":"Report_Created","context":{"groupId":"acc_17"}}'
KEY = "bench-core-key"
AUTHORIZATION = "Basic YmVuY2gtY29yZS1rZXk6"  # base64("bench-core-key:")


def load_core(path: Path | None) -> ModuleType:
    if path is None:
        from ingestion import acceptance

        return acceptance
    spec = importlib.util.spec_from_file_location(f"core_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def sdk_batch(size: int) -> bytes:
    """Messages as segment-analytics-python 2.x batches them: each stamped when it was made."""
    started = time.time() - 60
    items = []
    for i in range(size):
        made = datetime.fromtimestamp(started + i * 0.003, UTC)
        common = {
            "integrations": {},
            "anonymousId": None,
            "timestamp": made.isoformat(timespec="milliseconds"),
            "context": {"library": {"name": "analytics-python", "version": "2.4.0"}},
            "userId": f"usr_{i % 500}",
            "messageId": str(uuid.uuid4()),
        }
        if i % 10 == 0:
            traits = {"email": f"u{i}@acme.test", "plan": "pro", "seats": i}
            items.append({**common, "type": "identify", "traits": traits})
        elif i % 5 == 0:
            items.append({**common, "type": "page", "name": "Docs", "properties": {"path": "/d"}})
        else:
            common["context"]["groupId"] = f"acct_{i % 50}"
            properties = {"report": "weekly", "rows": i}
            items.append(
                {**common, "type": "track", "event": f"Event_{i % 20}", "properties": properties}
            )
    sent_at = datetime.now(UTC).isoformat(timespec="milliseconds")
    return json.dumps({"batch": items, "sentAt": sent_at}).encode()


def small_track_batch(size: int) -> bytes:
    """The /v1/batch body of bench_ingest.py."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    items = [
        {
            "type": "track",
            "userId": f"usr_{i % 37}",
            "event": "Report_Created",
            "context": {"groupId": f"acc_{i % 7}"},
            "timestamp": now,
        }
        for i in range(size)
    ]
    return json.dumps({"batch": items, "sentAt": now}, separators=(",", ":")).encode()


def us_per_message(
    core: ModuleType, endpoint: str, body: bytes, encoding: str | None, messages: int
) -> float:
    limits = core.Limits(single=32 * 1024, batch=4 * 1024 * 1024)
    now_ms = int(time.time() * 1000)

    def once() -> object:
        return core.accept(
            endpoint,
            body,
            authorization=AUTHORIZATION,
            content_encoding=encoding,
            now_ms=now_ms,
            limits=limits,
        )

    outcome = once()
    stored = sum(len(accepted.messages) for accepted in outcome.accepted)
    if stored != messages or (outcome.body or {}).get("rejected"):
        raise SystemExit(f"{endpoint}: expected {messages} accepted messages, got {stored}")
    best = float("inf")
    for _ in range(ROUNDS):
        calls = 0
        started = time.process_time()  # CPU time: other jobs on the machine shift it less
        while (elapsed := time.process_time() - started) < ROUND_SECONDS:
            once()
            calls += 1
        best = min(best, elapsed / calls)
    return best * 1e6 / messages


def cases() -> list[tuple[str, str, bytes, str | None, int]]:
    rows = []
    for size in (100, 2500):
        raw = sdk_batch(size)
        rows.append((f"/v1/batch {size:>5,} SDK msgs, plain", "v1/batch", raw, None, size))
        rows.append(
            (f"/v1/batch {size:>5,} SDK msgs, gzip", "v1/batch", gzip.compress(raw), "gzip", size)
        )
    rows.append(
        ("/v1/batch   100 small tracks (wrk)", "v1/batch", small_track_batch(100), None, 100)
    )
    rows.append(("v2/track, one ~80-byte call", "v2/track", TRACK_BODY, None, 1))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--against", type=Path, help="an older acceptance module (a file: ingestion/core.py)"
    )
    args = parser.parse_args()
    cores = [("us/msg", load_core(None))]
    if args.against:
        cores.append((f"us/msg ({args.against.name})", load_core(args.against)))
    load = os.getloadavg()[0]
    print(
        f"acceptance core, CPU only, best of {ROUNDS} x {ROUND_SECONDS}s; load average {load:.2f}"
    )
    header = f"{'body':<38} {'size':>9}" + "".join(f" {label:>22}" for label, _ in cores)
    if len(cores) == 2:
        header += f" {'speed-up':>9}"
    print(header)
    print("-" * len(header))
    for label, endpoint, body, encoding, messages in cases():
        figures = [us_per_message(core, endpoint, body, encoding, messages) for _, core in cores]
        line = f"{label:<38} {len(body) / 1024:>7.1f}KB" + "".join(f" {f:>22.2f}" for f in figures)
        if len(figures) == 2:
            line += f" {figures[1] / figures[0]:>8.1f}x"
        print(line, flush=True)
    best = us_per_message(cores[0][1], "v1/batch", small_track_batch(100), None, 100)
    print(
        f"=> /v1/batch x100 (wrk body): {1e6 / best:,.0f} messages/s on one core in the core alone"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
