"""Score history benchmark: the history of every user and account built from the rollups, a
backfill of past days, and the daily step.

    .venv/bin/python bench/bench_history.py

Seeds the scoring benchmark's database first (bench/seed_scoring.py: 100,000 accounts, 1,000,000
users, ~30M events over 30 days; skipped when already seeded today; BENCH_SCORES_DB and SEED_USERS
as there). Then, on that database, with `engagement.history.score_history_update`:
- full history: a workspace whose history was never built (its points deleted and the tables
  rewritten compact): every past day with data, so the 29 days before today of 30 seeded days,
  for every user and account;
- backfill: late events of 1,000 users for the day five days ago, found by the hourly check,
  recompute that day and every later one;
- daily step: as run just after midnight, the day that ended (today, once it is over), with the
  backfill check's scan of the rollups.
Then the p95 of reading one account's 30-day history (`account_score_history`). Prints a table;
exits 1 when it could not measure.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import seed_scoring  # noqa: E402

FULL_TARGET_SECONDS = 300.0
DAILY_TARGET_SECONDS = 60.0


def main() -> int:
    seeded = seed_scoring.seed()
    os.environ["DATABASE_URL"] = seed_scoring.DATABASE_URL
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # A database seeded before the history tables existed gets them.
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, check=True
    )
    import django

    django.setup()
    from django.db import connection
    from django.db.models import F

    from engagement.history import account_score_history, score_history_update
    from engagement.models import (
        AccountScoreDay,
        EventRollup,
        Membership,
        ScoreHistoryState,
        UserScoreDay,
        Workspace,
    )

    workspace = Workspace.objects.get(id=seeded["workspace_id"])
    rows: list[tuple[str, str, str]] = []
    for key in ("accounts", "users", "rollups", "events"):
        rows.append((f"seeded {key}", f"{seeded[key]:,}", ""))

    ScoreHistoryState.objects.filter(workspace=workspace).delete()
    with connection.cursor() as cursor:
        for table in ("engagement_userscoreday", "engagement_accountscoreday"):
            cursor.execute(f"DELETE FROM {table} WHERE workspace_id = %s", [workspace.id])  # noqa: S608
            cursor.execute(f"VACUUM FULL ANALYZE {table}")

    now = datetime.now(UTC)
    today = now.date()
    started = time.monotonic()
    full = score_history_update(workspace_id=workspace.id, now=now)
    full_s = time.monotonic() - started
    days_with_data = UserScoreDay.objects.filter(workspace=workspace).values("day").distinct()
    rows.append(
        (
            "full history, never built",
            f"{full_s:.1f} s",
            f"{full.user_points:,} user points, {full.account_points:,} account points over "
            f"{days_with_data.count()} days (target < {FULL_TARGET_SECONDS:.0f} s)",
        )
    )

    # Late events: 1,000 users' rollups of five days ago grow (as a backfill import adds to them).
    backfilled_day = today - timedelta(days=5)
    users = list(
        EventRollup.objects.filter(product_id=workspace.product_id, day=backfilled_day)
        .order_by("user_id")
        .values_list("user_id", flat=True)
        .distinct()[:1000]
    )
    EventRollup.objects.filter(
        product_id=workspace.product_id, day=backfilled_day, user_id__in=users
    ).update(count=F("count") + 3, updated_at=datetime.now(UTC))
    started = time.monotonic()
    backfill = score_history_update(workspace_id=workspace.id, now=datetime.now(UTC))
    backfill_s = time.monotonic() - started
    rows.append(
        (
            "backfill of one past day",
            f"{backfill_s:.1f} s",
            f"days {backfill.first_day} to {backfill.last_day} recomputed "
            f"({backfill.user_points:,} user points)",
        )
    )

    # The daily step just after midnight: today has ended. The backfill above is hours old by
    # then (the step would otherwise recompute its days again, within the overlap).
    EventRollup.objects.filter(
        product_id=workspace.product_id, day=backfilled_day, user_id__in=users
    ).update(updated_at=datetime.now(UTC) - timedelta(hours=2))
    tomorrow = datetime(today.year, today.month, today.day, tzinfo=UTC) + timedelta(
        days=1, minutes=1
    )
    started = time.monotonic()
    daily = score_history_update(workspace_id=workspace.id, now=tomorrow)
    daily_s = time.monotonic() - started
    rows.append(
        (
            "daily step",
            f"{daily_s:.1f} s",
            f"day {daily.last_day}: {daily.user_points:,} user points, "
            f"{daily.account_points:,} account points (target < {DAILY_TARGET_SECONDS:.0f} s)",
        )
    )
    if full.mode != "rebuilt" or backfill.first_day != backfilled_day or daily.mode != "updated":
        print(f"unexpected runs: {full.mode}, {backfill.first_day}, {daily.mode}; no measurement")
        return 1

    account_ids = list(
        Membership.objects.order_by("account_id").values_list("account_id", flat=True)[:2000:20]
    )
    timings = []
    for account_id in account_ids:
        tick = time.monotonic()
        account_score_history(workspace_id=workspace.id, account_id=account_id, days=30)
        timings.append((time.monotonic() - tick) * 1000)
    p95 = statistics.quantiles(timings, n=20)[-1]
    rows.append(("read one account's 30 days, p95", f"{p95:.1f} ms", f"{len(timings)} accounts"))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('engagement_userscoreday')), "
            "pg_size_pretty(pg_total_relation_size('engagement_accountscoreday'))"
        )
        user_size, account_size = cursor.fetchone()
    stored = AccountScoreDay.objects.filter(workspace=workspace).count()
    rows.append(("stored history size", user_size, f"users; accounts {account_size} ({stored:,})"))

    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>12}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
