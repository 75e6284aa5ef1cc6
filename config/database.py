"""DATABASES from the environment: PostgreSQL from a URL, or the embedded SQLite file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import dj_database_url
import psycopg
from django.core.exceptions import ImproperlyConfigured
from psycopg.conninfo import conninfo_to_dict

from config.env import env_bool, env_int

_POSTGRESQL_ENGINES = {
    "django.db.backends.postgresql",
    "django.contrib.gis.db.backends.postgis",
}
# libpq's defaults wait for a host that does not answer (a crashed machine, a partition) far
# longer than a client waits for its answer: without these a request, the drain or the pool
# would hang on the old primary of a failover instead of failing over to the new one. Each one
# a URL sets itself wins.
_CONNECTION_DEFAULTS = {
    # Per host of a multi-host URL: a silent host costs this much before the next is tried.
    "connect_timeout": 5,
    # An open connection whose server vanished: found dead after 10 s idle + 3 probes 5 s apart,
    # and after 25 s of a sent query going unacknowledged (keepalives do not run then).
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 25_000,
}
_URL_FORMS = (
    "postgres://user:password@host:5432/name, or for several hosts (tried in order, "
    "e.g. a primary and its standbys) postgres://user:password@host1:5432,host2:5432/name"
    "?target_session_attrs=read-write"
)


def _database_from_url(url: str, variable: str) -> dict:
    try:
        database = _parse(url)
    except (ValueError, psycopg.Error) as error:
        # Never the URL itself: it may hold the password.
        reason = _without_password(str(error), url)
        raise ImproperlyConfigured(
            f"{variable} is not a valid database URL ({reason}); expected {_URL_FORMS}"
        ) from None
    if database["ENGINE"] in _POSTGRESQL_ENGINES:
        options = database.setdefault("OPTIONS", {})
        for name, value in _CONNECTION_DEFAULTS.items():
            options.setdefault(name, value)
        # QuerySet.iterator() outside a transaction (a form's ModelChoiceField renders its
        # choices so, in the dashboard and the admin) declares a cursor WITH HOLD that outlives
        # its transaction: behind a transaction pooler (PgBouncer) the next FETCH may reach
        # another server session, where it does not exist. Client-side cursors hold no such
        # state; the service's large reads are chunked by key, not by cursor.
        database["DISABLE_SERVER_SIDE_CURSORS"] = True
    # Under ASGI (uvicorn) every request runs on a fresh thread, so a persistent connection is
    # never reused and each read opened a new PostgreSQL session; a pool per process fixes that.
    if database["ENGINE"] == "django.db.backends.postgresql" and env_bool("DATABASE_POOL", True):
        database["CONN_MAX_AGE"] = 0
        database.setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": env_int("DATABASE_POOL_MAX_SIZE", 10, minimum=1),
            # Waiting longer for a connection only delays the 503 a client would retry anyway.
            "timeout": 3,
            # A replacement for a lost connection is retried 1, 2, 4, 8... s apart until this
            # many seconds have passed (psycopg_pool's default: 300). After a failover's half
            # minute without a primary the next try could be 16 s away from the new primary;
            # given up after 2 s, the next request that needs a connection tries at once.
            "reconnect_timeout": 2,
        }
    return database


def _parse(url: str) -> dict[str, Any]:
    """dj_database_url's settings for `url`; a PostgreSQL URL may name several hosts, as libpq's
    do (`host1:5432,host2:5433`): HOST and PORT are then libpq's comma-separated lists, which
    Django hands to psycopg as they are, and psycopg tries the hosts in order."""
    parts = re.fullmatch(r"([^:/?#]+)://([^/?#]*)(.*)", url, flags=re.DOTALL)
    # A password is percent-encoded, so the last "@" ends the user part (as urllib splits it).
    user, at, hosts = parts.group(2).rpartition("@") if parts else ("", "", "")
    if parts is None or "," not in hosts:
        return dict(dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True))
    # Everything but the hosts parses as a one-host URL would (query options, currentSchema);
    # the host list as libpq parses it.
    one_host = f"{parts.group(1)}://{user}{at}multi-host{parts.group(3)}"
    database = dict(dj_database_url.parse(one_host, conn_max_age=60, conn_health_checks=True))
    if database["ENGINE"] not in _POSTGRESQL_ENGINES:
        raise ValueError("several hosts are for PostgreSQL only")
    parsed = conninfo_to_dict(f"postgresql://{hosts}/")
    names = str(parsed.get("host") or "").split(",")
    ports = str(parsed.get("port") or "").split(",")
    if any(not name for name in names):
        raise ValueError("a host of the list is empty")
    for port in ports:
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"port {port!r} is not a number from 1 to 65535")
    database["HOST"] = ",".join(names)
    database["PORT"] = ",".join(ports) if any(ports) else ""
    return database


def _without_password(message: str, url: str) -> str:
    password = re.match(r"[^:/]+://[^:@/]*:([^@/]*)@", url)
    if password and password.group(1):
        message = message.replace(password.group(1), "***")
    return message


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
    databases = {"default": _database_from_url(database_url, "DATABASE_URL")}
    if not replica_url:
        return databases, []
    databases["replica"] = {
        **_database_from_url(replica_url, "DATABASE_REPLICA_URL"),
        "TEST": {"MIRROR": "default"},
    }
    return databases, ["config.db_routers.ReadApiReplicaRouter"]
