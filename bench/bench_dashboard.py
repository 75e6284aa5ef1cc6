"""Dashboard benchmark: p95 of the pages a product team keeps open, signed in.

    .venv/bin/python bench/bench_dashboard.py
    SEED_USERS=100000 BENCH_SCORES_DB=eds_bench_small .venv/bin/python bench/bench_dashboard.py

Seeds the scoring benchmark's database first (bench/seed_scoring.py: 100,000 accounts, 1,000,000
users, ~30M events over 30 days; skipped when already seeded today; BENCH_SCORES_DB and
SEED_USERS as there), derives the overview's daily tallies from the seeded rollups, scores the
workspace if it was never scored, and adds an "Enterprise" segment (plan equals enterprise: a
quarter of the accounts). Then, in-process through Django's test client with a signed-in
superuser (the whole request: URL routing, session, scoping, queries, template), SAMPLES
requests of each page after two warm-up requests:
- the overview: cold (its 60-second cache cleared before each request) and warm;
- the account list: first page, page 5,000 (or the last page of a smaller seed), a search, the
  segment filter;
- an account page (a different account each time, from the top 1,000);
- the segment's page (its first members and its joins and leaves per day).
Prints a table; exits 1 when a page does not answer 200.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import seed_scoring  # noqa: E402
from targets import figure  # noqa: E402

SAMPLES = int(os.environ.get("BENCH_SAMPLES", "40"))
TARGET_MS = 300.0
DEEP_PAGE = 5000


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def main() -> int:
    seeded = seed_scoring.seed()
    os.environ["DATABASE_URL"] = seed_scoring.DATABASE_URL
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, check=True
    )
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client

    from dashboard.forms import PER_PAGE
    from engagement.models import AccountScore, Segment, Workspace
    from engagement.scoring import workspace_rescore
    from engagement.segments import segment_refresh

    workspace = Workspace.objects.get(id=seeded["workspace_id"])
    with connection.cursor() as cursor:
        # The seed writes rollups directly: the daily tallies the apply path appends alongside
        # (what the overview reads) are derived from them once, as migration 0012 does.
        cursor.execute(
            """INSERT INTO engagement_eventdaytally (product_id, day, event_name, count)
               SELECT product_id, day, event_name, SUM(count) FROM engagement_eventrollup
               WHERE product_id = %(product)s
                 AND NOT EXISTS (SELECT 1 FROM engagement_eventdaytally
                                 WHERE product_id = %(product)s)
               GROUP BY product_id, day, event_name""",
            {"product": workspace.product_id},
        )
        if cursor.rowcount:
            print(f"derived {cursor.rowcount:,} daily tallies from the seeded rollups", flush=True)
    if not AccountScore.objects.filter(workspace=workspace).exists():
        started = time.monotonic()
        workspace_rescore(workspace_id=workspace.id)
        print(f"scored the workspace in {time.monotonic() - started:.0f} s", flush=True)
    segment, created = Segment.objects.get_or_create(
        workspace=workspace,
        name="Enterprise",
        defaults={
            "conditions": [{"field": "trait:plan", "operator": "equals", "value": "enterprise"}]
        },
    )
    if created or not segment.members.exists():
        segment_refresh(segment=segment)
    with connection.cursor() as cursor:
        # What autovacuum does soon after: the planner then knows a segment's size.
        cursor.execute("ANALYZE engagement_segmentmember")
        cursor.execute("ANALYZE engagement_accountscore")
        cursor.execute("ANALYZE engagement_userscore")
    people = get_user_model().objects
    person = people.filter(username="bench").first() or people.create_superuser(
        "bench", "bench@example.com", "bench-passw0rd!"
    )
    client = Client()
    client.force_login(person)

    accounts = AccountScore.objects.filter(workspace=workspace).count()
    pages = max(1, -(-accounts // PER_PAGE))
    deep = min(DEEP_PAGE, pages)
    top = list(
        AccountScore.objects.filter(workspace=workspace)
        .order_by("-engagement_score", "account_id")
        .values_list("account_id", flat=True)[:1000]
    )
    base = f"/w/{workspace.id}"
    cases: list[tuple[str, object, bool]] = [
        ("overview, cold (cache cleared)", f"{base}/", True),
        ("overview, warm", f"{base}/", False),
        ("accounts, first page", f"{base}/accounts/", False),
        (f"accounts, page {deep:,}", f"{base}/accounts/?page={deep}", False),
        ("accounts, search 'account 4242'", f"{base}/accounts/?q=account+4242", False),
        ("accounts, segment filter", f"{base}/accounts/?segment={segment.id}", False),
        ("account page", lambda i: f"{base}/accounts/{top[i % len(top)]}/", False),
        ("segment page (members, joins/leaves)", f"{base}/segments/{segment.id}/", False),
    ]
    rows = []
    failed = False
    for label, path, cold in cases:
        times = []
        for index in range(SAMPLES + 2):
            url = path(index) if callable(path) else path
            if cold:
                cache.clear()
            started = time.perf_counter()
            response = client.get(url)
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                print(f"{label}: {url} answered {response.status_code}", flush=True)
                failed = True
                break
            if index >= 2:
                times.append(elapsed)
        if times:
            value = p95(times)
            verdict = "ok" if value < TARGET_MS else f"over {TARGET_MS:.0f} ms"
            rows.append((label, f"{statistics.median(times):.0f}", f"{value:.0f}", verdict))
            if cold:
                figure("overview_cold_p95_ms", value)

    print(
        f"\n{accounts:,} scored accounts, {seeded['users']:,} users, {seeded['events']:,} events; "
        f"{SAMPLES} requests each, signed in, in-process (Django test client)"
    )
    print(f"{'page':<36} {'median ms':>10} {'p95 ms':>8}  target < {TARGET_MS:.0f} ms")
    for label, median, value, verdict in rows:
        print(f"{label:<36} {median:>10} {value:>8}  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
