"""The ingestion door and the drain through PgBouncer in transaction mode beside direct (issue 72):
bench/bench_ingest.py's door run and drain, in one run, each twice over each route.

    .venv/bin/python bench/bench_pooler.py            # 10 s wrk runs, a 60,000 backlog
    .venv/bin/python bench/bench_pooler.py --quick    # 5 s runs, a 10,000 backlog

The door (uvicorn, 2 workers, uvloop, httptools, group commit; v2 track, 32 connections, every
202 checked against the store) is measured direct, pooled, pooled, direct, so both routes are
centred on the same moment; then one process drains a backlog direct and one through the pooler,
with INGESTION_DRAIN_BATCH at its default and at 100 (a live drain's small batches, where the
per-transaction temporary tables weigh most). PgBouncer (bench/pgbouncer.py: Debian's 1.18,
`pool_mode = transaction`, default_pool_size 20) runs in front of BENCH_PG_URL's server on a free
port. The database is bench_ingest's (BENCH_DB, eds_bench_ingest by default), made afresh.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import bench_ingest as ingest  # noqa: E402
from bench.pgbouncer import pgbouncer  # noqa: E402

DOOR_LABEL = "ASGI door, v2 track, durable"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _routed(database_url: str):
    """bench_ingest.server_env with DATABASE_URL replaced (for the door and the drain)."""
    original = ingest.server_env

    def env(settings_module: str = "config.settings") -> dict[str, str]:
        return {**original(settings_module), "DATABASE_URL": database_url}

    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 s wrk runs, a 10,000 backlog")
    parser.add_argument("--seconds", type=int, default=10, help="duration of each wrk run")
    parser.add_argument("--backlog", type=int, default=60_000, help="requests for each drain")
    parser.add_argument("--asgi-workers", type=int, default=2, help="uvicorn worker processes")
    args = parser.parse_args()
    seconds = 5 if args.quick else args.seconds
    backlog = 10_000 if args.quick else args.backlog
    wrk_bin = ingest.ensure_wrk()
    print(f"setting up {ingest.DB_NAME} ...", flush=True)
    key = ingest.recreate_database()
    ingest.clear_kicks()
    print(ingest.machine(), flush=True)
    direct_env = ingest.server_env
    direct_url = direct_env()["DATABASE_URL"]
    server_port = int(direct_url.rsplit(":", 1)[1].split("/")[0])
    track = ingest.lua_script("/v2/track", ingest.TRACK_BODY, key)
    setup = f"uvicorn, {args.asgi_workers} workers, uvloop, httptools, group commit"
    with pgbouncer(port=_free_port(), server_port=server_port) as bouncer:
        pooled_url = bouncer.url(ingest.DB_NAME)
        routes = {"direct": direct_env, "through PgBouncer": _routed(pooled_url)}
        rounds: dict[str, list] = {route: [] for route in routes}
        try:
            for route in ("direct", "through PgBouncer", "through PgBouncer", "direct"):
                env = routes[route]()
                with ingest.Server("asgi", ingest.uvicorn(args.asgi_workers), env):
                    run = ingest.Run(f"{DOOR_LABEL}, {route}", setup)
                    rounds[route].append(ingest.measure(wrk_bin, track, seconds, run, stored=True))
        finally:
            ingest.clear_kicks()
        drains: list[tuple[str, str, dict]] = []
        for batch in ("40000", "100"):
            for route, env in routes.items():
                ingest.server_env = lambda settings_module="config.settings", e=env, b=batch: {
                    **e(settings_module),
                    "INGESTION_DRAIN_BATCH": b,
                }
                try:
                    ingest.fill_backlog(key, backlog)
                    drains.append((route, batch, ingest.drain(backlog)))
                finally:
                    ingest.server_env = direct_env
        errors = bouncer.errors()
    door = {route: ingest.combined(runs) for route, runs in rounds.items()}
    print("\ndoor (v2 track, 32 connections, two rounds each, direct-pooled-pooled-direct):")
    for route, run in door.items():
        print(
            f"  {route:18} {run.requests_per_s:8,.0f} req/s  p50 {run.p50_ms:5.1f} ms  "
            f"p99 {run.p99_ms:6.1f} ms  non-2xx {run.non_2xx}  lost {run.lost}"
        )
    ratio = door["through PgBouncer"].requests_per_s / door["direct"].requests_per_s
    print(f"  through PgBouncer / direct: {ratio:.2f}")
    print("drain (one process, one event a request):")
    for route, batch, drained in drains:
        print(
            f"  {route:18} INGESTION_DRAIN_BATCH={batch:>6}: {drained['requests']:,} requests in "
            f"{drained['seconds']:.1f} s = {drained['events_per_s']:,.0f} events/s, "
            f"left {drained['left_in_store']}"
        )
    print(f"PgBouncer's log: {len(errors)} error lines" + "".join(f"\n  {e}" for e in errors[:5]))
    lost = sum(run.lost for run in door.values())
    if lost or errors or any(d["left_in_store"] for _, _, d in drains):
        print("FAIL: a 202 missing from the store, a drain left requests, or PgBouncer erred")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
