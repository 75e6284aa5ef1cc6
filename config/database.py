"""DATABASES from the environment: PostgreSQL from a URL, or the embedded SQLite file."""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int


def _database_from_url(url: str) -> dict:
    # A kept connection may be dead after a database restart: it is checked before its first use
    # in each request or task (with the pool: each time the pool lends it), so the restart costs
    # a reconnect, not an error.
    database = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    # Under ASGI (uvicorn) every request runs on a fresh thread, so a persistent connection is
    # never reused and each read opened a new PostgreSQL session; a pool per process fixes that.
    if database["ENGINE"] == "django.db.backends.postgresql" and env_bool("DATABASE_POOL", True):
        database["CONN_MAX_AGE"] = 0
        database.setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": env_int("DATABASE_POOL_MAX_SIZE", 10, minimum=1),
            # Waiting longer for a connection only delays the 503 a client would retry anyway.
            "timeout": 3,
        }
    return database


def _embedded(data_dir: Path) -> dict:
    data_dir.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": data_dir / "eds.sqlite3",
        "OPTIONS": {
            # Web, worker and beat share one file: WAL lets readers run beside the one writer,
            # IMMEDIATE takes the write lock up front so transactions queue instead of failing.
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


def databases_from_env(
    *, database_url: str, replica_url: str, production: bool, data_dir: Path
) -> tuple[dict, list[str]]:
    """DATABASES and DATABASE_ROUTERS. A replica's queries are the read API's
    (config.db_routers), so ingestion, draining and scoring keep the primary to themselves."""
    if production and not database_url:
        raise ImproperlyConfigured("DATABASE_URL is required when DJANGO_ENV=production")
    if replica_url and not database_url:
        raise ImproperlyConfigured("DATABASE_REPLICA_URL is a replica of DATABASE_URL: set both")
    if not database_url:
        return {"default": _embedded(data_dir)}, []
    databases = {"default": _database_from_url(database_url)}
    if not replica_url:
        return databases, []
    databases["replica"] = {**_database_from_url(replica_url), "TEST": {"MIRROR": "default"}}
    return databases, ["config.db_routers.ReadApiReplicaRouter"]
