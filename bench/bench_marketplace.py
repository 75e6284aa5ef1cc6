"""Time a full first sync of 10,000 licenses from the fake marketplace over local HTTP.

Standalone: `.venv/bin/python bench/bench_marketplace.py [--licenses 10000]`. Uses its own
PostgreSQL database (BENCH_MARKETPLACE_DATABASE_URL, default eds_mkt_bench on 127.0.0.1, dropped
and recreated each time), runs `manage.py fake_marketplace` as a separate process on a free local
port, connects a product through the services (the first sync runs through the real Celery task,
eagerly) and prints licenses per second. Target: under 30 s. Exits non-zero if it could not
measure.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.databases import recreate_migrated_database  # noqa: E402 (after the path is set)

DATABASE_URL = os.environ.get(
    "BENCH_MARKETPLACE_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/eds_mkt_bench"
)
TARGET_SECONDS = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(url: str, seconds: float = 30.0) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return json.loads(response.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--licenses", type=int, default=10_000)
    args = parser.parse_args()

    env = {
        **os.environ,
        "DATABASE_URL": DATABASE_URL,
        "CELERY_TASK_ALWAYS_EAGER": "true",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    recreate_migrated_database(DATABASE_URL, env=env)
    port = free_port()
    fake = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "fake_marketplace",
            "--port",
            str(port),
            "--licenses",
            str(args.licenses),
            "--apps",
            "3",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        state = wait_for(f"{base}/_fake/state")
        os.environ["MARKETPLACE_API_URL"] = base
        import django

        django.setup()
        from engagement.models import Account
        from engagement.services import product_create
        from marketplace import services
        from marketplace.models import SyncRun

        product, _ = product_create(name="Bench")
        resolved = services.connection_details_check(
            email="vendor@example.com",
            api_token="fake-token",
            vendor_id=state["vendor_id"],
            app_name=state["apps"][0]["appName"],
        )
        rows = []

        def timed_run(label: str, start) -> bool:
            started = time.monotonic()
            run_id = start()
            seconds = time.monotonic() - started
            run = SyncRun.objects.get(id=run_id)
            rows.append((label, run, seconds))
            return run.outcome == SyncRun.Outcome.SUCCEEDED

        def first_sync() -> int:
            connection = services.connection_configure(
                product_id=product.id,
                email="vendor@example.com",
                api_token="fake-token",
                vendor_id=state["vendor_id"],
                developer_id=resolved.developer_id,
                marketplace_product_id=resolved.product_id,
                app_name=resolved.app_name,
            )  # the first sync runs on commit, eagerly, through the Celery task
            return SyncRun.objects.filter(connection=connection).latest("id").id

        def sync_now() -> int:
            connection_id = SyncRun.objects.latest("id").connection_id
            return services.connection_sync_request(
                connection_id=connection_id, trigger=SyncRun.Trigger.MANUAL
            ).run_id

        ok = timed_run("first full sync (accounts created)", first_sync)
        ok = timed_run("full sync again (accounts matched)", sync_now) and ok
        accounts = Account.objects.filter(product=product).count()
    finally:
        fake.terminate()
        fake.wait(timeout=10)

    print(
        f"marketplace sync, {args.licenses} licenses from the fake over local HTTP, "
        f"50 per page; {accounts} accounts"
    )
    header = (
        f"{'run':38} {'pages':>6} {'seen':>7} {'created':>8} {'matched':>8} {'skipped':>8} "
        f"{'seconds':>8} {'lic/s':>8}"
    )
    print(header)
    print("-" * len(header))
    for label, run, seconds in rows:
        print(
            f"{label:38} {run.pages:>6} {run.licenses_seen:>7} {run.accounts_created:>8} "
            f"{run.accounts_matched:>8} {run.skipped_without_cloud_id:>8} {seconds:>8.2f} "
            f"{run.licenses_seen / seconds:>8.0f}"
        )
    first_seconds = rows[0][2]
    verdict = "met" if first_seconds < TARGET_SECONDS else "MISSED"
    print(
        f"target: first full sync under {TARGET_SECONDS:.0f} s: {verdict} ({first_seconds:.1f} s)"
    )
    if not ok or any(run.licenses_seen != args.licenses for _, run, _ in rows):
        print("could not measure: a run did not finish with every license", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
