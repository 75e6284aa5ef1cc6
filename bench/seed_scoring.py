"""Seed a scoring benchmark database: one product, 100,000 accounts, 1,000,000 users, 30 days of
about 30,000,000 events, written as the apply path writes them (users, accounts, memberships,
events, daily rollups, event names), generated inside PostgreSQL with set-based INSERTs.

    .venv/bin/python bench/seed_scoring.py            # seeds eds_bench_scores unless already seeded
    SEED_USERS=100000 .venv/bin/python bench/seed_scoring.py   # a smaller variant

The data is anchored to the day it was seeded (the window ends today): a later day drops and
reseeds the database. Idempotent: a complete seed of the same day and size is left as it is.
"""

# SQL is assembled from fixed names and constants; values are query parameters.
# ruff: noqa: S608

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.databases import migrate, recreate_migrated_database  # noqa: E402 (after the path)

SERVER_URL = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
DB_NAME = os.environ.get("BENCH_SCORES_DB", "eds_bench_scores")
DATABASE_URL = f"{SERVER_URL}/{DB_NAME}"
USERS = int(os.environ.get("SEED_USERS", "1000000"))
ACCOUNTS = max(1, USERS // 10)
DAYS = 30
EVENT_NAMES = [f"Feature_{i:02d}_Used" for i in range(20)]
# Weights 1-10 for most names, 0 (excluded) for one, unlisted (default 1) for a few.
WEIGHTS = {name: (i % 10) + 1 for i, name in enumerate(EVENT_NAMES[:16])}
WEIGHTS[EVENT_NAMES[16]] = 0


def log(message: str) -> None:
    print(f"[seed {time.strftime('%H:%M:%S')}] {message}", flush=True)


def marker() -> str:
    # "rollups ordered by account": the layout of the rollups (see seed); a database seeded
    # before it is seeded again.
    date = datetime.now(UTC).date().isoformat()
    return f"bench-scoring {date} users={USERS} rollups ordered by account"


def _server() -> psycopg.Connection:
    return psycopg.connect(f"{SERVER_URL}/postgres", autocommit=True)


def _database_exists() -> bool:
    with _server() as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]).fetchone()


def _seeded() -> bool:
    if not _database_exists():
        return False
    with psycopg.connect(DATABASE_URL) as conn:
        try:
            row = conn.execute(
                "SELECT 1 FROM engagement_product WHERE name = %s", [marker()]
            ).fetchone()
        except psycopg.errors.UndefinedTable:
            return False
    return row is not None


def _drop_secondary_indexes(conn: psycopg.Connection, table: str) -> list[str]:
    """Drop the indexes that back no constraint; return their definitions to rebuild."""
    rows = conn.execute(
        """
        SELECT i.indexname, i.indexdef FROM pg_indexes i
        WHERE i.tablename = %s AND NOT EXISTS (
            SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)
        """,
        [table],
    ).fetchall()
    for name, _ in rows:
        conn.execute(f'DROP INDEX "{name}"')
    return [definition for _, definition in rows]


def seed() -> dict:
    """Seed unless already seeded; return what is there."""
    if _seeded():
        log(f"already seeded ({marker()}); migrating")
        # A seed of the same day from before a pull: its schema is brought up to date.
        migrate(DATABASE_URL)
        return counts()
    started = time.monotonic()
    log(f"creating {DB_NAME} and migrating")
    recreate_migrated_database(DATABASE_URL)
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET work_mem = '256MB'")
        # Foreign-key triggers off while loading generated rows that are consistent by
        # construction (the superuser the benchmark connects as may do this).
        conn.execute("SET session_replication_role = replica")
        product_id = conn.execute(
            "INSERT INTO engagement_product (name, created_at) VALUES ('seeding', now()) "
            "RETURNING id"
        ).fetchone()[0]
        workspace_id = conn.execute(
            """
            INSERT INTO engagement_workspace (product_id, name, lookback_days, daily_event_cap,
                account_filter, created_at, updated_at)
            VALUES (%s, 'Default', 30, NULL, '{}', now(), now()) RETURNING id
            """,
            [product_id],
        ).fetchone()[0]
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO engagement_eventweight (workspace_id, event_name, weight) "
                "VALUES (%s, %s, %s)",
                [(workspace_id, name, weight) for name, weight in WEIGHTS.items()],
            )
            cursor.executemany(
                "INSERT INTO engagement_eventname (product_id, name, first_seen_at) "
                "VALUES (%s, %s, now() - interval '31 days')",
                [(product_id, name) for name in EVENT_NAMES],
            )
        # Rows written "yesterday", so the benchmark's watermark sees none of them as new.
        written = "now() - interval '1 day'"

        log(f"accounts: {ACCOUNTS:,}")
        conn.execute(
            f"""
            INSERT INTO engagement_account (product_id, tracking_id, identified, traits,
                trait_times, created_at, updated_at)
            SELECT %s, 'acct_' || i, true,
                jsonb_build_object('name', 'Account ' || i, 'domain', 'acct' || i || '.example',
                    'plan', (ARRAY['free', 'team', 'business', 'enterprise'])[1 + i %% 4]),
                '{{}}', {written}, {written}
            FROM generate_series(1, %s) i
            """,
            [product_id, ACCOUNTS],
        )
        first_account = conn.execute(
            "SELECT min(id) FROM engagement_account WHERE product_id = %s", [product_id]
        ).fetchone()[0]

        log(f"users: {USERS:,}")
        user_indexes = _drop_secondary_indexes(conn, "engagement_user")
        conn.execute(
            f"""
            INSERT INTO engagement_user (product_id, tracking_id, identified, email, traits,
                trait_times, first_seen_at, last_seen_at, created_at, updated_at)
            SELECT %s, 'usr_' || i, true, 'user' || i || '@acct' || (1 + i %% %s) || '.example',
                jsonb_build_object('email', 'user' || i || '@acct' || (1 + i %% %s) || '.example',
                    'role', (ARRAY['admin', 'member', 'viewer'])[1 + i %% 3]),
                '{{}}', date_trunc('day', now()) - make_interval(days => 31 + i %% 300),
                NULL, {written}, {written}
            FROM generate_series(1, %s) i
            """,
            [product_id, ACCOUNTS, ACCOUNTS, USERS],
        )
        for definition in user_indexes:
            conn.execute(definition)
        first_user = conn.execute(
            "SELECT min(id) FROM engagement_user WHERE product_id = %s", [product_id]
        ).fetchone()[0]

        log("memberships: one account per user (10 users per account)")
        conn.execute(
            f"""
            INSERT INTO engagement_membership (user_id, account_id, linked_at, created_at)
            SELECT u.id, %s + (u.id - %s) %% %s, {written}, {written}
            FROM engagement_user u WHERE u.product_id = %s
            """,
            [first_account, first_user, ACCOUNTS, product_id],
        )

        # Per active user (4 in 5), 1-24 (user, event, day) rows on distinct days of the last 30,
        # each counting 1-5 events: about 10 rows and 30 events per user on average. Low-numbered
        # event names are the common ones. Stored day by day, the users of a day in no order, as
        # a live drain writes them: in user order (how they are generated) a range of users
        # would sit on a few pages of its own, which no installation has, and a full rescore's
        # ranges of users would read a thirtieth of the pages they read in practice.
        log("rollups")
        rollup_indexes = _drop_secondary_indexes(conn, "engagement_eventrollup")
        conn.execute(
            f"""
            INSERT INTO engagement_eventrollup (product_id, user_id, account_id, account_key,
                event_name, day, count, last_at, updated_at)
            SELECT %(product)s, u.id, a.account_id, a.account_id,
                'Feature_' || lpad((floor(20 * power(((u.id * 7 + j * 131) %% 1000) / 1000.0, 2))
                    )::int::text, 2, '0') || '_Used',
                (date_trunc('day', now())
                    - make_interval(days => ((u.id + j * 7) %% {DAYS})::int))::date,
                1 + ((u.id * 31 + j * 17) %% 5),
                date_trunc('day', now()) - make_interval(days => ((u.id + j * 7) %% {DAYS})::int)
                    + interval '8 hours'
                    + (1 + ((u.id * 31 + j * 17) %% 5)) * interval '37 minutes',
                {written}
            FROM engagement_user u
            JOIN LATERAL (SELECT m.account_id FROM engagement_membership m
                          WHERE m.user_id = u.id LIMIT 1) a ON true
            CROSS JOIN LATERAL generate_series(0, (u.id * 7919) %% 24) j
            WHERE u.product_id = %(product)s AND u.id %% 5 <> 0
            ORDER BY 6, hashint8(u.id)  -- the day, then its users mixed
            """,
            {"product": product_id},
        )

        log("events: one row per counted event of each rollup")
        event_indexes = _drop_secondary_indexes(conn, "engagement_event")
        conn.execute(
            """
            INSERT INTO engagement_event (product_id, user_id, account_id, name, timestamp)
            SELECT r.product_id, r.user_id, r.account_id, r.event_name,
                r.day + interval '8 hours' + k * interval '37 minutes'
            FROM engagement_eventrollup r CROSS JOIN LATERAL generate_series(1, r.count) k
            WHERE r.product_id = %s
            """,
            [product_id],
        )
        log("rebuilding indexes")
        for definition in rollup_indexes + event_indexes:
            conn.execute(definition)

        log("users' last seen")
        conn.execute(
            """
            UPDATE engagement_user u SET last_seen_at = r.last_at
            FROM (SELECT user_id, max(last_at) AS last_at FROM engagement_eventrollup
                  WHERE product_id = %s GROUP BY user_id) r
            WHERE u.id = r.user_id
            """,
            [product_id],
        )
        _past_days_ordered(conn)
        conn.execute("VACUUM ANALYZE")
        conn.execute(
            "UPDATE engagement_product SET name = %s WHERE id = %s", [marker(), product_id]
        )
    log(f"seeded in {time.monotonic() - started:.0f} s")
    return counts()


def _past_days_ordered(conn: psycopg.Connection) -> None:
    """What an installation's rollups look like once the hourly job has run: the days that
    ended stored again by account and user by that job itself (engagement.services.
    event_rollups_order), today's as the drain left them; then the space the moved rows left
    reclaimed, as autovacuum reclaims it for the next days' rows (this image runs without)."""
    log("past days' rollups stored again by account and user (the hourly job)")
    code = (
        "import django; django.setup(); "
        "from engagement.services import event_rollups_order; print(event_rollups_order())"
    )
    env = {
        **os.environ,
        "DATABASE_URL": DATABASE_URL,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "ROLLUPS_ORDER_DAYS_PER_RUN": str(DAYS + 1),
    }
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
    conn.execute("VACUUM FULL engagement_eventrollup")


def counts() -> dict:
    with psycopg.connect(DATABASE_URL) as conn:
        product_id, workspace_id = conn.execute(
            "SELECT p.id, w.id FROM engagement_product p JOIN engagement_workspace w "
            "ON w.product_id = p.id WHERE p.name = %s",
            [marker()],
        ).fetchone()

        def one(sql: str) -> int:
            return conn.execute(sql, [product_id]).fetchone()[0]

        return {
            "product_id": product_id,
            "workspace_id": workspace_id,
            "accounts": one("SELECT count(*) FROM engagement_account WHERE product_id = %s"),
            "users": one("SELECT count(*) FROM engagement_user WHERE product_id = %s"),
            "rollups": one("SELECT count(*) FROM engagement_eventrollup WHERE product_id = %s"),
            "events": one("SELECT count(*) FROM engagement_event WHERE product_id = %s"),
        }


if __name__ == "__main__":
    for key, value in seed().items():
        print(f"{key:>14}: {value:,}")
