"""Score history benchmark: the history of every user and account built from the rollups, a
backfill of past days, and the daily step.

    .venv/bin/python bench/bench_history.py

Seeds the scoring benchmark's database first (bench/seed_scoring.py: 100,000 accounts, 1,000,000
users, ~30M events over 30 days; skipped when already seeded today; BENCH_SCORES_DB and SEED_USERS
as there). Then, on that database, with `engagement.history.score_history_update`:
- full history: a workspace whose history was never built (its points deleted and the tables
  rewritten compact): every past day with data, so the 29 days before today of 30 seeded days,
  for every user and account;
- backfill: late events of 1,000 users for the day five days ago, applied as the drain applies
  them (`events_store`, which notes the day for the history); the score refresh's tick sees the
  note (`score_history_backfill_is_due`) and the update recomputes that day and every later one
  for every user and account, writing the points that changed;
- daily step: as run just after midnight, the day that ended (today, once it is over).
Then the p95 of reading one account's 30-day history (`account_score_history`). Prints a table;
exits 1 when it could not measure.

    BENCH_HISTORY_STEPS=backfill .venv/bin/python bench/bench_history.py

measures the backfill alone, on the history a previous run left (built in full first when there
is none); BENCH_BACKFILL_USERS (default 1000) sets how many users' late events it applies (enough
of them move each day's p90, and with it most points of those days).
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
from targets import TARGETS, figure  # noqa: E402

FULL_TARGET_SECONDS = TARGETS["history_full_s"].at_most
BACKFILL_TARGET_SECONDS = TARGETS["history_backfill_s"].at_most
DAILY_TARGET_SECONDS = TARGETS["history_daily_s"].at_most


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
    from engagement.models import ScoreHistoryState, Workspace

    workspace = Workspace.objects.get(id=seeded["workspace_id"])
    rows: list[tuple[str, str, str]] = []
    for key in ("accounts", "users", "rollups", "events"):
        rows.append((f"seeded {key}", f"{seeded[key]:,}", ""))
    only_backfill = os.environ.get("BENCH_HISTORY_STEPS", "") == "backfill"
    built = ScoreHistoryState.objects.filter(
        workspace=workspace, built_through__isnull=False
    ).exists()
    if not (only_backfill and built):
        full = full_history(workspace, rows)
        if full.mode != "rebuilt":
            print(f"unexpected run: {full.mode}; no measurement")
            return 1
    backfilled_day, backfill = late_events(workspace, rows)
    if backfill.first_day != backfilled_day:
        print(f"unexpected backfill: from {backfill.first_day}; no measurement")
        return 1
    if not only_backfill:
        daily = daily_step(workspace, rows)
        if daily.mode != "updated":
            print(f"unexpected daily step: {daily.mode}; no measurement")
            return 1
        reads_and_size(workspace, rows)
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>12}  {note}")
    return 0


def full_history(workspace, rows: list) -> object:
    """Every past day of every user and account, from nothing (the tables compacted first)."""
    from django.db import connection

    from engagement.history import score_history_update
    from engagement.models import ScoreHistoryState, UserScoreDay

    ScoreHistoryState.objects.filter(workspace=workspace).delete()
    with connection.cursor() as cursor:
        for table in ("engagement_userscoreday", "engagement_accountscoreday"):
            cursor.execute(f"DELETE FROM {table} WHERE workspace_id = %s", [workspace.id])  # noqa: S608
            cursor.execute(f"VACUUM FULL ANALYZE {table}")

    now = datetime.now(UTC)
    started = time.monotonic()
    full = score_history_update(workspace_id=workspace.id, now=now)
    full_s = time.monotonic() - started
    figure("history_full_s", full_s)
    days_with_data = UserScoreDay.objects.filter(workspace=workspace).values("day").distinct()
    rows.append(
        (
            "full history, never built",
            f"{full_s:.1f} s",
            f"{full.user_points:,} user points, {full.account_points:,} account points over "
            f"{days_with_data.count()} days (target < {FULL_TARGET_SECONDS:.0f} s)",
        )
    )
    return full


def late_events(workspace, rows: list) -> tuple[object, object]:
    """BENCH_BACKFILL_USERS (1,000) users' events of five days ago arrive today (3 each, under a
    name and account they already have that day), applied as the drain applies them; the
    refresh tick's check finds the noted day and the history update recomputes from it."""
    from engagement.history import score_history_backfill_is_due, score_history_update
    from engagement.models import EventRollup
    from engagement.services import Message, messages_apply

    users = int(os.environ.get("BENCH_BACKFILL_USERS", "1000"))
    backfilled_day = datetime.now(UTC).date() - timedelta(days=5)
    noon_ms = int(
        datetime(backfilled_day.year, backfilled_day.month, backfilled_day.day, 12, tzinfo=UTC)
        .timestamp() * 1000
    )  # fmt: skip
    picked: dict[str, tuple[str | None, str]] = {}
    for user_tid, account_tid, name in (
        EventRollup.objects.filter(product_id=workspace.product_id, day=backfilled_day)
        .order_by("user_id")
        .values_list("user__tracking_id", "account__tracking_id", "event_name")[: users * 5]
    ):
        picked.setdefault(user_tid, (account_tid, name))
    tracks = [
        Message("track", noon_ms + k, user_id=user_tid, group_id=account_tid, event=name)
        for user_tid, (account_tid, name) in list(picked.items())[:users]
        for k in range(3)
    ]
    started = time.monotonic()
    messages_apply(product_id=workspace.product_id, messages=tracks)
    applied_s = time.monotonic() - started
    started = time.monotonic()
    due = score_history_backfill_is_due(workspace_id=workspace.id)
    due_ms = (time.monotonic() - started) * 1000
    started = time.monotonic()
    backfill = score_history_update(workspace_id=workspace.id, now=datetime.now(UTC))
    backfill_s = time.monotonic() - started
    figure("history_backfill_s", backfill_s)
    rows.append(
        (
            "backfill of one past day",
            f"{backfill_s:.1f} s",
            f"days {backfill.first_day} to {backfill.last_day} recomputed for every subject; "
            f"{backfill.user_points:,} user and {backfill.account_points:,} account points "
            f"changed (target < {BACKFILL_TARGET_SECONDS:.0f} s)",
        )
    )
    rows.append(
        (
            "  its events applied; noted",
            f"{applied_s:.1f} s",
            f"{len(tracks):,} events of {len(tracks) // 3:,} users; the refresh tick's check "
            f"{due_ms:.1f} ms, due: {due}",
        )
    )
    return backfilled_day, backfill


def daily_step(workspace, rows: list) -> object:
    """As run just after midnight: today has ended."""
    from engagement.history import score_history_update

    today = datetime.now(UTC).date()
    tomorrow = datetime(today.year, today.month, today.day, tzinfo=UTC) + timedelta(
        days=1, minutes=1
    )
    started = time.monotonic()
    daily = score_history_update(workspace_id=workspace.id, now=tomorrow)
    daily_s = time.monotonic() - started
    figure("history_daily_s", daily_s)
    rows.append(
        (
            "daily step",
            f"{daily_s:.1f} s",
            f"day {daily.last_day}: {daily.user_points:,} user points, "
            f"{daily.account_points:,} account points (target < {DAILY_TARGET_SECONDS:.0f} s)",
        )
    )
    return daily


def reads_and_size(workspace, rows: list) -> None:
    """The p95 of reading one account's 30 days, and the stored history's size."""
    from django.db import connection

    from engagement.history import account_score_history
    from engagement.models import AccountScoreDay, Membership

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


if __name__ == "__main__":
    sys.exit(main())
