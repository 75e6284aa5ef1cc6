"""A benchmark's own PostgreSQL database: created when missing, then migrated."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ensure_migrated_database(database_url: str) -> None:
    """Create the database named at the end of `database_url` if missing, and migrate it."""
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    admin_url = database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": database_url},
        check=True,
    )
