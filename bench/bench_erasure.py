"""Erasure benchmark: one user with 100,000 events over 30 daily partitions, among other users'
events, erased by `engagement.erasure.erasure_run` (what the Celery task runs) on PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/eds_bench_erasure \\
        .venv/bin/python bench/bench_erasure.py

The database is dropped, created, migrated and seeded on every run (bench/databases.py): a
product, 30 days of partitions, the user's 100,000 events and their rollups, and OTHER_EVENTS
(default 2,000,000) events of 10,000 other users. Prints the seconds the erasure took against
the 60 s target; exits 1 above it.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.databases import recreate_migrated_database  # noqa: E402 (after the path is set)

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/eds_bench_erasure")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

TARGET_SECONDS = 60.0
USER_EVENTS = 100_000
OTHER_EVENTS = int(os.environ.get("OTHER_EVENTS", "2000000"))
DAYS = 30


def main() -> int:
    # A fresh machine has no such database; an old one would hold every earlier run's events.
    recreate_migrated_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.db import connection

    from engagement.erasure import erasure_request, erasure_run
    from engagement.models import Erasure, User
    from engagement.services import event_partitions_maintain, product_create

    assert connection.vendor == "postgresql", "this benchmark measures PostgreSQL"
    today = datetime.now(UTC).date()
    event_partitions_maintain(today=today - timedelta(days=DAYS))
    event_partitions_maintain(today=today)
    product, _ = product_create(name=f"erasure bench {time.time():.0f}")
    user = User.objects.create(product=product, tracking_id="bench-erased", email="e@bench.test")
    start = datetime.now(UTC) - timedelta(days=DAYS - 1)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO engagement_user (product_id, tracking_id, identified, email, traits, "
            "trait_times, created_at, updated_at) SELECT %s, 'other-' || n, true, '', '{}', '{}', "
            "now(), now() FROM generate_series(1, 10000) n",
            [product.id],
        )
        cursor.execute("SELECT min(id) FROM engagement_user WHERE product_id = %s AND tracking_id "
                       "LIKE 'other-%%'", [product.id])  # fmt: skip
        first_other = cursor.fetchone()[0]
        seed = time.monotonic()
        cursor.execute(
            "INSERT INTO engagement_event (product_id, user_id, name, timestamp) "
            "SELECT %s, %s, 'event-' || (n %% 5), %s + (n %% %s) * interval '1 day' "
            "+ (n %% 80000) * interval '1 second' FROM generate_series(1, %s) n",
            [product.id, user.id, start, DAYS, USER_EVENTS],
        )
        cursor.execute(
            "INSERT INTO engagement_event (product_id, user_id, name, timestamp) "
            "SELECT %s, %s + (n %% 10000), 'event-' || (n %% 5), %s + (n %% %s) * interval '1 day' "
            "+ (n %% 80000) * interval '1 second' FROM generate_series(1, %s) n",
            [product.id, first_other, start, DAYS, OTHER_EVENTS],
        )
        cursor.execute(
            "INSERT INTO engagement_eventrollup (product_id, user_id, account_key, event_name, "
            "day, "
            "count, last_at, updated_at) SELECT product_id, user_id, 0, name, timestamp::date, "
            "count(*), max(timestamp), now() FROM engagement_event WHERE product_id = %s "
            "AND user_id = %s GROUP BY 1, 2, 4, 5",
            [product.id, user.id],
        )
        cursor.execute("ANALYZE engagement_event")
    print(f"seeded {USER_EVENTS:,} + {OTHER_EVENTS:,} events in {time.monotonic() - seed:.1f} s")
    erasure = erasure_request(
        product_id=product.id,
        kind=Erasure.Kind.USER,
        target_id=user.id,
        suppress=True,
        via=Erasure.Via.COMMAND,
    )
    began = time.monotonic()
    done = erasure_run(erasure_id=erasure.id)
    seconds = time.monotonic() - began
    print(f"erasure of a user with {done.counts['events']:,} events: {seconds:.2f} s "
          f"(target {TARGET_SECONDS:.0f} s); counts {done.counts}")  # fmt: skip
    return 0 if seconds <= TARGET_SECONDS and done.counts["events"] == USER_EVENTS else 1


if __name__ == "__main__":
    sys.exit(main())
