"""A whole installation as an operator runs it, for the backup/restore and upgrade tests: the web
server (uvicorn), a Celery worker and the beat, each a real process started from a source tree
(this one, or a previous release's materialised by tests/releases.py) on a database of its own,
and what a user of it sees: every read API answer and the dashboard overview's figures."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
from django.conf import settings
from django.db import connection

from tests.processes import free_port, http, wait_for

ROOT = Path(__file__).resolve().parents[1]
SECRET_KEY = "test-only-" + "x" * 40
COMMANDS = {
    "web": [
        "uvicorn",
        "config.asgi:application",
        "--host",
        "127.0.0.1",
        "--workers",
        "1",
        "--loop",
        "uvloop",
        "--http",
        "httptools",
    ],
    "worker": ["celery", "-A", "config", "worker", "--concurrency", "1", "--loglevel", "WARNING"],
    "beat": ["celery", "-A", "config", "beat", "--loglevel", "WARNING"],
}


def database_url(name: str) -> str:
    """A database of the test server, reached directly (not through a pooler)."""
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}"


def server_admin() -> psycopg.Connection:
    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"] or "postgres",
        dbname="postgres",
        autocommit=True,
    )


def query(database: str, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of one statement on `database` (an installation's, not the test's own)."""
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"] or "postgres",
        dbname=database,
        autocommit=True,
    ) as session:
        return session.execute(sql, params).fetchall()


class Installation:
    """The processes of one installation: `source` is the tree they run from, `database` the
    name of their database. Logs go to `logs`, shown when a wait fails."""

    def __init__(self, *, source: Path, database: str, logs: Path, port: int | None = None):
        self.source = source
        self.database = database
        self.logs = logs
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.processes: dict[str, subprocess.Popen] = {}
        logs.mkdir(parents=True, exist_ok=True)
        self.env = {
            **os.environ,
            "DJANGO_ENV": "production",
            "SECRET_KEY": SECRET_KEY,
            "FIELD_ENCRYPTION_SALT": "test-only-salt",
            "ALLOWED_HOSTS": "127.0.0.1",
            "DATABASE_URL": database_url(database),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "STATIC_ROOT": str(logs / "static"),
            "DATA_DIR": str(logs / "data"),
            "PROMETHEUS_MULTIPROC_DIR": str(logs / "data" / "metrics"),
            "READ_API_THROTTLE_RATE": "off",
            "SCORING_REFRESH_SECONDS": "1",
            "INGESTION_SWEEP_SECONDS": "1",
            "PYTHONPATH": str(source),
        }
        (logs / "data" / "metrics").mkdir(parents=True, exist_ok=True)

    def manage(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(  # noqa: S603
            [sys.executable, "manage.py", *args],
            cwd=self.source,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def start(self, *roles: str) -> Installation:
        for role in roles:
            command = [*COMMANDS[role]]
            if role == "web":
                command += ["--port", str(self.port)]
            log = (self.logs / f"{role}.log").open("ab")
            self.processes[role] = subprocess.Popen(  # noqa: S603
                [sys.executable, "-m", *command],
                cwd=self.source,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if "web" in roles:
            self.wait(lambda: http("GET", f"{self.base}/healthz")[0] == 200, "the web server")
        return self

    def stop(self, *roles: str) -> None:
        for role in roles or list(self.processes):
            process = self.processes.pop(role, None)
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=10)

    def wait(self, predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
        try:
            wait_for(predicate, timeout=timeout)
        except AssertionError:
            tails = {
                log.name: log.read_text(errors="replace")[-3000:]
                for log in sorted(self.logs.glob("*.log"))
            }
            raise AssertionError(
                f"waiting for {what}: not true after {timeout} s; {tails}"
            ) from None

    def backlog(self) -> int:
        return query(self.database, "SELECT count(*) FROM ingestion_acceptedrequest")[0][0]


def post(base: str, path: str, body: dict, key: str) -> int:
    status, _ = http(
        "POST",
        f"{base}{path}",
        body,
        {"Authorization": f"Basic {key}", "Content-Type": "application/json"},
    )
    return status


def _get(base: str, path: str, headers: dict) -> object:
    status, body = http("GET", f"{base}{path}", headers=headers)
    assert status == 200, (path, status, body[:500])
    return json.loads(body)


def read_api_answers(base: str, token: str, workspace_id: int) -> dict[str, object]:
    """Every answer of the read API about the workspace: the ranked lists of accounts and users
    (every page), and each account and user with its traits and segments, the base address
    left out of the links so that two installations compare."""
    headers = {"Authorization": f"Bearer {token}"}
    answers: dict[str, object] = {}
    for kind in ("accounts", "users"):
        path = f"/v2/{kind}?workspace_id={workspace_id}&limit=100"
        listing = _get(base, path, headers)
        answers[path] = listing
        assert listing["pagination"]["total"] == len(listing["data"])
        for record in listing["data"]:
            one = f"/v2/{kind}/{record['id']}?workspace_id={workspace_id}&expand=traits,segments"
            answers[one] = _get(base, one, headers)
    answers["/v2/segments"] = _get(base, f"/v2/segments?workspace_id={workspace_id}", headers)
    return json.loads(json.dumps(answers).replace(base, ""))


def overview_figures(base: str, cookie: str, workspace_id: int) -> str:
    """The dashboard overview's content as a signed-in person sees it (counts, bands, events per
    day, top events, movers, revenue), without the time it was computed at."""
    status, body = http("GET", f"{base}/w/{workspace_id}/", headers={"Cookie": cookie})
    assert status == 200, (status, body[:500])
    page = body.decode()
    main = page[page.index('<main id="main"') : page.index("</main>")]
    return re.sub(r"Figures as of [0-9:]+", "Figures as of (time)", main)


def without(answers: object, keys: set[str]) -> object:
    """`answers` without the given keys at any depth (what two runs differ in by nature)."""
    if isinstance(answers, dict):
        return {k: without(v, keys) for k, v in answers.items() if k not in keys}
    if isinstance(answers, list):
        return [without(item, keys) for item in answers]
    return answers


def settled(read: Callable[[], object], what: str, timeout: float = 60.0) -> object:
    """What `read` answers once two reads a refresh apart agree, but for `scored_at`: every
    refresh stamps it, whether or not a score moved."""
    deadline = time.monotonic() + timeout
    previous = read()
    while time.monotonic() < deadline:
        time.sleep(1.5)
        current = read()
        if without(current, {"scored_at"}) == without(previous, {"scored_at"}):
            return current
        previous = current
    raise AssertionError(f"{what} still changing after {timeout} s")


def differences(left: object, right: object, path: str = "") -> list[str]:
    """Where two answers differ, each as `path: left != right` (a readable assertion message)."""
    if isinstance(left, dict) and isinstance(right, dict):
        found = []
        for key in sorted(set(left) | set(right), key=str):
            found += differences(left.get(key), right.get(key), f"{path}/{key}")
        return found
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [
            d
            for n, (a, b) in enumerate(zip(left, right, strict=True))
            for d in differences(a, b, f"{path}[{n}]")
        ]
    return [] if left == right else [f"{path}: {left!r} != {right!r}"]
