"""Time a full first sync from the fake marketplace over local HTTP: 10,000 licenses with 60,000
transaction lines (and their uninstall feedback), beside the licenses-only figure.

Standalone: `.venv/bin/python bench/bench_marketplace.py [--licenses 10000] [--transactions
60000] [--baseline-ref v0.1.0]`. Uses its own PostgreSQL database
(BENCH_MARKETPLACE_DATABASE_URL, default eds_mkt_bench on 127.0.0.1, dropped and recreated each
time), runs `manage.py fake_marketplace` as separate processes on free local ports (one serving
licenses only, one serving licenses with transactions), connects a product to each through the
services (the first sync runs through the real Celery task, eagerly) and prints what each run
read and how long it took. With `--baseline-ref`, the same licenses-only measurement is first
made with that git revision's code (its tree extracted with `git archive` into a temporary
directory, its own bench script run there against `<database>_base`), so the figure the sync had
before transactions were read stands beside today's in the same run. Target: the first sync with
transactions under 60 s. Exits non-zero if it could not measure.
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.databases import recreate_migrated_database  # noqa: E402 (after the path is set)

DATABASE_URL = os.environ.get(
    "BENCH_MARKETPLACE_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/eds_mkt_bench"
)
TARGET_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(url: str, seconds: float = 60.0) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return json.loads(response.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def baseline(ref: str, licenses: int, env: dict) -> tuple[float | None, str]:
    """The licenses-only first sync with `ref`'s code: (seconds or None, its report)."""
    with tempfile.TemporaryDirectory(prefix="eds-bench-base-") as tree:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        done = subprocess.run(
            [sys.executable, "bench/bench_marketplace.py", "--licenses", str(licenses)],
            cwd=tree,
            env={**env, "BENCH_MARKETPLACE_DATABASE_URL": DATABASE_URL + "_base"},
            capture_output=True,
            text=True,
        )
    report = done.stdout + done.stderr
    found = re.search(r"^first full sync \(accounts created\)\s+(?:\S+\s+){5}(\S+)", report, re.M)
    return (float(found.group(1)) if found else None), report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--licenses", type=int, default=10_000)
    parser.add_argument("--transactions", type=int, default=60_000)
    parser.add_argument(
        "--baseline-ref",
        default="",
        help="A git revision whose licenses-only first sync to measure first (e.g. v0.1.0).",
    )
    args = parser.parse_args()

    env = {
        **os.environ,
        "DATABASE_URL": DATABASE_URL,
        "CELERY_TASK_ALWAYS_EAGER": "true",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "LOG_LEVEL": "WARNING",
    }
    base_seconds, base_report = None, ""
    if args.baseline_ref:
        base_seconds, base_report = baseline(args.baseline_ref, args.licenses, env)
    os.environ.update(env)
    recreate_migrated_database(DATABASE_URL, env=env)
    fakes = {}
    for label, transactions in (("licenses only", 0), ("with transactions", args.transactions)):
        port = free_port()
        fakes[label] = (
            subprocess.Popen(
                [
                    sys.executable, "manage.py", "fake_marketplace", "--port", str(port),
                    "--licenses", str(args.licenses), "--apps", "3",
                    "--transactions", str(transactions),
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
            ),
            f"http://127.0.0.1:{port}",
        )  # fmt: skip
    rows = []
    ok = True
    try:
        states = {label: wait_for(f"{base}/_fake/state") for label, (_, base) in fakes.items()}
        import django

        django.setup()
        from django.conf import settings

        from engagement.models import Account
        from engagement.services import product_create
        from marketplace import services
        from marketplace.models import SyncRun

        def timed_run(label: str, start) -> bool:
            started = time.monotonic()
            run_id = start()
            seconds = time.monotonic() - started
            run = SyncRun.objects.get(id=run_id)
            rows.append((label, run, seconds))
            return run.outcome == SyncRun.Outcome.SUCCEEDED

        for label, (_, base) in fakes.items():
            state = states[label]
            settings.MARKETPLACE_API_URL = base  # what connection_configure stores as api_url
            product, _ = product_create(name=f"Bench {label}")
            resolved = services.connection_details_check(
                email="vendor@example.com",
                api_token="fake-token",  # noqa: S106 (the fake's well-known credential)
                vendor_id=state["vendor_id"],
                app_name=state["apps"][0]["appName"],
            )

            def first_sync(product=product, resolved=resolved, state=state) -> int:
                connection = services.connection_configure(
                    product_id=product.id,
                    email="vendor@example.com",
                    api_token="fake-token",  # noqa: S106
                    vendor_id=state["vendor_id"],
                    developer_id=resolved.developer_id,
                    marketplace_product_id=resolved.product_id,
                    app_name=resolved.app_name,
                )  # the first sync runs on commit, eagerly, through the Celery task
                return SyncRun.objects.filter(connection=connection).latest("id").id

            def sync_now(product=product) -> int:
                connection_id = (
                    SyncRun.objects.filter(connection__product=product).latest("id").connection_id
                )
                return services.connection_sync_request(
                    connection_id=connection_id, trigger=SyncRun.Trigger.MANUAL
                ).run_id

            ok = timed_run(f"{label}: first full sync", first_sync) and ok
            ok = timed_run(f"{label}: full sync again", sync_now) and ok
            ok = ok and Account.objects.filter(product=product).exists()
    finally:
        for process, _ in fakes.values():
            process.terminate()
            process.wait(timeout=10)

    print(
        f"marketplace sync from the fake over local HTTP, 50 per page: {args.licenses} licenses; "
        f"with transactions: {states['with transactions']['transactions']} transaction lines "
        f"and {states['with transactions']['feedback']} feedback"
    )
    header = (
        f"{'run':38} {'licenses':>8} {'sales':>7} {'feedback':>8} {'created':>8} "
        f"{'updated':>8} {'seconds':>8}"
    )
    print(header)
    print("-" * len(header))
    for label, run, seconds in rows:
        print(
            f"{label:38} {run.licenses_seen:>8} {run.transactions_seen:>7} "
            f"{run.feedback_seen:>8} {run.accounts_created:>8} {run.accounts_updated:>8} "
            f"{seconds:>8.2f}"
        )
    if args.baseline_ref:
        shown = f"{base_seconds:.2f} s" if base_seconds is not None else "not measured"
        print(f"licenses only, first full sync with {args.baseline_ref}'s code: {shown}")
        print("  its own report: " + base_report.strip().replace("\n", "\n  "))
    with_sales = next(s for label, _, s in rows if label == "with transactions: first full sync")
    verdict = "met" if with_sales < TARGET_SECONDS else "MISSED"
    print(
        f"target: first full sync with transactions under {TARGET_SECONDS:.0f} s: {verdict} "
        f"({with_sales:.1f} s)"
    )
    if not ok or any(run.licenses_seen != args.licenses for _, run, _ in rows):
        print("could not measure: a run did not finish with every license", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
