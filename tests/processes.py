"""Real processes for end-to-end tests: the service started as production starts it (uvicorn,
celery) or as `make run` does (honcho and the Procfile, on SQLite), and small HTTP helpers."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

from django.db import connection

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url(db: dict) -> str:
    """The URL of a DATABASES entry, one host or several (HOST and PORT libpq's comma-separated
    lists, as config/database.py makes them from a multi-host URL)."""
    hosts = str(db["HOST"] or "127.0.0.1").split(",")
    ports = str(db["PORT"] or "").split(",")
    ports = ports * len(hosts) if len(ports) == 1 else ports  # libpq: one port for every host
    hosts = [f"[{host}]" if ":" in host else host for host in hosts]  # an IPv6 address
    netloc = ",".join(
        f"{host}:{port}" if port else host for host, port in zip(hosts, ports, strict=True)
    )
    password = f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    return f"postgres://{quote(db['USER'])}{password}@{netloc}/{db['NAME']}"


def pooled_database_url(db: dict) -> str:
    """The test database through TEST_POOLER_URL (a PgBouncer in transaction mode in front of
    the test server, given without a database name: `.ci/run` starts one), else direct."""
    pooler = os.environ.get("TEST_POOLER_URL", "").rstrip("/")
    return f"{pooler}/{db['NAME']}" if pooler else database_url(db)


def web_command(port: int, *, workers: int) -> list[str]:
    """The README's production web command (uvicorn on uvloop and httptools) on 127.0.0.1."""
    return [
        "uvicorn",
        "config.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
    ]


def production_env(broker_url: str, tmp_path: Path, *, direct: bool = False) -> dict:
    """The environment of a production-mode process on the test database: through
    TEST_POOLER_URL when it is set, unless `direct` (a test of the server's own sessions)."""
    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        DJANGO_ENV="production",
        SECRET_KEY="test-only-" + "x" * 40,
        FIELD_ENCRYPTION_SALT="test-only-salt",
        ALLOWED_HOSTS="127.0.0.1",
        DATABASE_URL=database_url(db) if direct else pooled_database_url(db),
        CELERY_BROKER_URL=broker_url,
        STATIC_ROOT=str(tmp_path / "static"),
    )
    return env


def spawn(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"not true after {timeout} s")


def http(method: str, url: str, body: dict | None = None, headers: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (local)
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
