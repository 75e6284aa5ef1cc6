"""A benchmark's own PostgreSQL database: created when missing (or dropped and created afresh),
then migrated."""

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _name_and_server(database_url: str) -> tuple[str, str]:
    """The database's name, and the URL of the server's `postgres` database (to create it)."""
    server, name = database_url.rsplit("/", 1)
    return name, f"{server}/postgres"


def ensure_migrated_database(database_url: str, *, env: Mapping[str, str] | None = None) -> None:
    """Create the database named at the end of `database_url` if missing, and migrate it."""
    import psycopg

    name, server_url = _name_and_server(database_url)
    with psycopg.connect(server_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    migrate(database_url, env=env)


def recreate_migrated_database(database_url: str, *, env: Mapping[str, str] | None = None) -> None:
    """Drop the database named at the end of `database_url` (closing its sessions), create it
    empty and migrate it: a run that starts from nothing."""
    import psycopg

    name, server_url = _name_and_server(database_url)
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    migrate(database_url, env=env)


def migrate(database_url: str, *, env: Mapping[str, str] | None = None) -> None:
    """Run the migrations against `database_url`, in `env` (default: this process's) with
    DATABASE_URL set to it; raise CalledProcessError when they fail (their errors on stderr)."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env={**(os.environ if env is None else env), "DATABASE_URL": database_url},
        check=True,
    )
