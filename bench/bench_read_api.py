"""Read API benchmark: latency of the read endpoints over real HTTP at full size.

    .venv/bin/python bench/bench_read_api.py             # 1,000 timed requests per endpoint
    .venv/bin/python bench/bench_read_api.py --requests 300

Seeds its own database (eds_bench_read) once, with COPY: one product, 100,000 accounts, 1,000,000
users, one membership per user (10 users per account) and a precomputed score row for every user
and account. Reads never touch raw events (they serve the precomputed score tables), so no events
are seeded. Serves the app as production does (uvicorn, config.asgi) on 127.0.0.1
(DJANGO_ENV=production, PostgreSQL, Redis cache for the throttle counts) and times sequential
requests with http.client. Prints p50/p99 per endpoint against the 50 ms p99 target; exits
non-zero when it could not measure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.databases import ensure_migrated_database  # noqa: E402 (after the path is set)

BIN = ROOT / ".venv" / "bin"
PG_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
DB_NAME = os.environ.get("BENCH_DB", "eds_bench_read")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7")
ACCOUNTS = 100_000
USERS = 1_000_000
PRODUCT_NAME = "Bench read API"
TARGET_P99_MS = 50.0
WORKERS = 2
SERVER_START_SECONDS = 30
DEEP_OFFSET = 50_000


def database_url() -> str:
    return f"{PG_URL}/{DB_NAME}"


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DJANGO_ENV="production",
        SECRET_KEY="bench-only-secret-key-not-for-production-use-0123456789",
        FIELD_ENCRYPTION_SALT="bench-only-salt",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        DATABASE_URL=database_url(),
        CELERY_BROKER_URL=REDIS_URL,
        CACHE_URL=REDIS_URL,
        # Throttling stays on (its Redis round trips are part of every real request) but high
        # enough that the benchmark itself is never throttled.
        READ_API_THROTTLE_RATE="1000000/minute",
        STATIC_ROOT=tempfile.mkdtemp(prefix="eds-bench-static-"),
        LOG_LEVEL="WARNING",
    )
    return env


def seeded(conn: psycopg.Connection) -> tuple[int, int] | None:
    row = conn.execute(
        "SELECT p.id, w.id FROM engagement_product p JOIN engagement_workspace w"
        " ON w.product_id = p.id WHERE p.name = %s ORDER BY w.id LIMIT 1",
        [PRODUCT_NAME],
    ).fetchone()
    if row is None:
        return None
    product_id, workspace_id = row
    counts = conn.execute(
        "SELECT (SELECT count(*) FROM engagement_account WHERE product_id = %(p)s),"
        " (SELECT count(*) FROM engagement_user WHERE product_id = %(p)s),"
        " (SELECT count(*) FROM engagement_accountscore WHERE workspace_id = %(w)s),"
        " (SELECT count(*) FROM engagement_userscore WHERE workspace_id = %(w)s)",
        {"p": product_id, "w": workspace_id},
    ).fetchone()
    if counts != (ACCOUNTS, USERS, ACCOUNTS, USERS):
        return None
    # Seeded before the ranks were read from the scoring state's histograms: seeded again.
    state = conn.execute(
        "SELECT 1 FROM engagement_scoringstate WHERE workspace_id = %s", [workspace_id]
    ).fetchone()
    if state is None:
        return None
    return product_id, workspace_id


def _score(n: int) -> int:
    """A spread of scores with many ties, deterministic per row."""
    return (n * 7919) % 101


def seed(conn: psycopg.Connection) -> tuple[int, int]:
    """Fresh rows with explicit ids (1..N) written by COPY, then the sequences moved past them."""
    conn.execute(
        "TRUNCATE engagement_product, engagement_account, engagement_user,"
        " engagement_membership, engagement_accountscore, engagement_userscore,"
        " engagement_workspace RESTART IDENTITY CASCADE"
    )
    now = time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime())
    conn.commit()
    # The product and its workspace through the real service, so every column gets its default.
    product_id, workspace_id = django_json(
        "from engagement.services import product_create; "
        f"p, w = product_create(name={PRODUCT_NAME!r}); print(json.dumps([p.id, w.id]))"
    )
    plans = ["starter", "pro", "enterprise"]
    breakdown = json.dumps(
        [
            {"event": "Report_Created", "count": 12, "weight": 3, "points": 36},
            {"event": "Dashboard_Viewed", "count": 40, "weight": 1, "points": 40},
        ]
    )

    with conn.cursor() as cur:
        with cur.copy(
            "COPY engagement_account (id, product_id, tracking_id, identified, traits,"
            " trait_times, created_at, updated_at) FROM STDIN"
        ) as copy:
            for n in range(1, ACCOUNTS + 1):
                traits = {
                    "name": f"Account {n}",
                    "domain": f"acct{n}.example",
                    "plan": plans[n % 3],
                    "createdAt": "2023-05-01",
                }
                copy.write_row(
                    (n, product_id, f"acct_{n}", True, json.dumps(traits), "{}", now, now)
                )
        with cur.copy(
            "COPY engagement_user (id, product_id, tracking_id, identified, email, traits,"
            " trait_times, first_seen_at, last_seen_at, created_at, updated_at) FROM STDIN"
        ) as copy:
            for n in range(1, USERS + 1):
                email = f"user{n}@acct{n % ACCOUNTS + 1}.example"
                traits = {"email": email, "name": f"User {n}"}
                copy.write_row(
                    (
                        n,
                        product_id,
                        f"usr_{n}",
                        True,
                        email,
                        json.dumps(traits),
                        "{}",
                        now,
                        now,
                        now,
                        now,
                    )
                )
        with cur.copy(
            "COPY engagement_membership (user_id, account_id, linked_at, created_at) FROM STDIN"
        ) as copy:
            for n in range(1, USERS + 1):
                copy.write_row((n, n % ACCOUNTS + 1, now, now))
        score_columns = (
            "workspace_id, engagement_score, score_change, raw_score,"
            " active_days, events_in_window, adoption, last_seen, score_breakdown, computed_at,"
            " previous_raw_score, previous_score"
        )
        with cur.copy(
            f"COPY engagement_accountscore (account_id, {score_columns}, active_users,"
            " total_users, active_user_share) FROM STDIN"
        ) as copy:
            for n in range(1, ACCOUNTS + 1):
                score = _score(n)
                copy.write_row(
                    (
                        n,
                        workspace_id,
                        score,
                        3,
                        score * 1.5,
                        9,
                        52,
                        0.5,
                        now,
                        breakdown,
                        now,
                        score * 1.4,
                        max(score - 3, 0),
                        score % 10,
                        10,
                        (score % 10) / 10,
                    )
                )
        with cur.copy(f"COPY engagement_userscore (user_id, {score_columns}) FROM STDIN") as copy:
            for n in range(1, USERS + 1):
                score = _score(n)
                copy.write_row(
                    (
                        n,
                        workspace_id,
                        score,
                        1,
                        score * 1.5,
                        4,
                        20,
                        0.5,
                        now,
                        breakdown,
                        now,
                        score * 1.4,
                        max(score - 1, 0),
                    )
                )
        for table in ("account", "user", "membership"):
            cur.execute(
                f"SELECT setval(pg_get_serial_sequence('engagement_{table}', 'id'),"  # noqa: S608
                f" (SELECT max(id) FROM engagement_{table}))"
            )
        _scoring_state_write(cur, workspace_id)
    conn.commit()
    return product_id, workspace_id


def _histogram(count: int) -> list[int]:
    """Rows per score 0-100 among the `count` rows seeded with ids 1..count (_score)."""
    histogram = [0] * 101
    for n in range(1, count + 1):
        histogram[_score(n)] += 1
    return histogram


def _scoring_state_write(cur: psycopg.Cursor, workspace_id: int) -> None:
    """The workspace's scoring state as a refresh leaves it: the read API reads the percentile
    ranks from its per-score histograms."""
    users, accounts = _histogram(USERS), _histogram(ACCOUNTS)
    cur.execute(
        """
        INSERT INTO engagement_scoringstate (workspace_id, scored_through, window_end,
            config_digest, p90, previous_p90, refreshed_at, full_rescored_at, last_refresh_ms,
            last_full_rescore_ms, account_scores, active_accounts, active_users,
            counted_through, product_accounts, product_users, scored_accounts, scored_users,
            user_scores, p90_at)
        VALUES (%(ws)s, now(), current_date, '', 1, 1, now(), now(), 0, 0, %(accounts)s,
            %(active_accounts)s, %(active_users)s, now(), %(a)s, %(u)s, %(a)s, %(u)s,
            %(users)s, now())
        """,
        {
            "ws": workspace_id,
            "accounts": Jsonb(accounts),
            "users": Jsonb(users),
            "active_accounts": ACCOUNTS - accounts[0],
            "active_users": USERS - users[0],
            "a": ACCOUNTS,
            "u": USERS,
        },
    )


def django_json(code: str):
    """Run Django code against the bench database; it prints one JSON value as its last line."""
    out = subprocess.run(
        [str(BIN / "python"), "manage.py", "shell", "-c", f"import json; {code}"],
        cwd=ROOT,
        env=server_env(),
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def issue_token(product_id: int) -> str:
    """A fresh token for this run (only its hash is stored, as in production)."""
    return django_json(
        "from readapi.services import api_token_create; "
        f"print(json.dumps(api_token_create(product_id={product_id}, name='bench')[1]))"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(port: int, path: str, token: str) -> tuple[int, bytes, float]:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    return response.status, body, (time.perf_counter() - started) * 1000


def wait_ready(port: int, token: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {process.returncode}")
        try:
            status, body, _ = get(port, "/v2/workspaces", token)
            if status == 200:
                return
            raise RuntimeError(f"/v2/workspaces answered {status}: {body[:200]!r}")
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("uvicorn did not start in time")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    rank = fraction * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def measure(port: int, token: str, paths, count: int, check) -> tuple[float, float, float]:
    """Warm up, then time `count` sequential requests; every answer must pass `check`."""
    for _ in range(min(50, count)):
        get(port, next(paths), token)
    timings = []
    for _ in range(count):
        status, body, elapsed = get(port, next(paths), token)
        if status != 200:
            raise RuntimeError(f"answered {status}: {body[:300]!r}")
        check(json.loads(body))
        timings.append(elapsed)
    return percentile(timings, 0.5), percentile(timings, 0.99), max(timings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="timed requests per endpoint")
    args = parser.parse_args()
    count = max(args.requests, 10)

    ensure_migrated_database(database_url(), env=server_env())
    with psycopg.connect(database_url()) as conn:
        ids = seeded(conn)
        if ids is None:
            started = time.monotonic()
            print(
                f"seeding {ACCOUNTS:,} accounts and {USERS:,} users with score rows ...", flush=True
            )
            ids = seed(conn)
            print(f"seeded in {time.monotonic() - started:.0f} s", flush=True)
        else:
            print("database already seeded; reusing it", flush=True)
    with psycopg.connect(database_url(), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")  # fresh statistics and visibility maps for index-only scans
    product_id, workspace_id = ids
    token = issue_token(product_id)

    port = free_port()
    process = subprocess.Popen(
        [
            str(BIN / "uvicorn"),
            "config.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(WORKERS),
            "--loop",
            "uvloop",
            "--http",
            "httptools",
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        cwd=ROOT,
        env=server_env(),
        start_new_session=True,
    )
    rng = random.Random(42)

    def cycle(make):
        while True:
            yield make()

    def page_check(expected: int):
        def check(body: dict) -> None:
            if len(body["data"]) != expected or body["pagination"]["total"] != ACCOUNTS:
                raise RuntimeError(f"unexpected page: {str(body)[:300]}")

        return check

    def one_record(body: dict) -> None:
        if "engagement_score" not in body and len(body.get("data", [])) != 1:
            raise RuntimeError(f"unexpected answer: {str(body)[:300]}")

    def workspaces(body: dict) -> None:
        if len(body["data"]) != 1:
            raise RuntimeError(f"unexpected answer: {str(body)[:300]}")

    scenarios = [
        (
            "baseline: GET /v2/workspaces (token, throttle, 1 small query)",
            cycle(lambda: "/v2/workspaces"),
            workspaces,
        ),
        (
            "GET /v2/accounts?workspace_id= (first page, 20)",
            cycle(lambda: f"/v2/accounts?workspace_id={workspace_id}"),
            page_check(20),
        ),
        (
            f"GET /v2/accounts?workspace_id=&offset={DEEP_OFFSET:,} (deep page)",
            cycle(lambda: f"/v2/accounts?workspace_id={workspace_id}&offset={DEEP_OFFSET}"),
            page_check(20),
        ),
        (
            "GET /v2/accounts/{id} (random account)",
            cycle(lambda: f"/v2/accounts/{rng.randint(1, ACCOUNTS)}?workspace_id={workspace_id}"),
            one_record,
        ),
        (
            "GET /v2/users?match_type=email (random user)",
            cycle(
                lambda: (
                    f"/v2/users?workspace_id={workspace_id}&match_type=email&match_value="
                    f"user{(n := rng.randint(1, USERS))}%40acct{n % ACCOUNTS + 1}.example"
                )
            ),
            one_record,
        ),
    ]
    results = []
    try:
        wait_ready(port, token, process)
        for label, paths, check in scenarios:
            p50, p99, worst = measure(port, token, paths, count, check)
            results.append((label, p50, p99, worst))
    except Exception as exc:  # report and fail: the figures could not be measured
        print(f"could not measure: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)

    print()
    print(f"Read API latency over HTTP: uvicorn {WORKERS} workers, DJANGO_ENV=production,")
    print(f"PostgreSQL + Redis on 127.0.0.1; {ACCOUNTS:,} accounts, {USERS:,} users, score rows")
    print("for all (reads serve precomputed scores and never touch raw events: none seeded);")
    print(f"{count:,} sequential requests per endpoint after a warm-up, new connection each.")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"Machine: {os.cpu_count()} cores, load average {load} (1, 5, 15 min) at the end.")
    print()
    print(f"{'endpoint':<62} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  p99 < 50 ms")
    print("-" * 102)
    for label, p50, p99, worst in results:
        verdict = "yes" if p99 < TARGET_P99_MS else "NO"
        print(f"{label:<62} {p50:>8.1f} {p99:>8.1f} {worst:>8.1f}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
