"""What the browser-client tests need outside the service: Segment's analytics-next, fetched from
the npm registry with `npm pack` and cached outside the repository (never vendored), a web page
served from another origin, and the service started as `make run` and as production start it."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from django.db import connection

from tests.processes import ROOT, free_port, http, production_env, spawn, wait_for

ANALYTICS_NEXT = "@segment/analytics-next@1.84.3"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "eds-tests"


def analytics_next_umd() -> Path:
    """The directory of analytics-next's browser build (dist/umd), fetched once per machine."""
    target = CACHE / ANALYTICS_NEXT.replace("/", "+")
    umd = target / "package" / "dist" / "umd"
    if not (umd / "index.js").exists():
        target.mkdir(parents=True, exist_ok=True)
        packed = subprocess.run(  # noqa: S603
            [shutil.which("npm") or "npm", "pack", ANALYTICS_NEXT, "--silent"],
            cwd=target,
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        ).stdout.split()[-1]
        with tarfile.open(target / packed) as archive:
            archive.extractall(target, filter="data")
    return umd


class _QuietHandler(SimpleHTTPRequestHandler):
    # A file follows its headers in a send of its own: with Nagle's algorithm it would wait
    # 40 ms for the browser's delayed ACK.
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@contextmanager
def page_server(directory: Path) -> Iterator[str]:
    """Serve `directory` on a port of its own: another origin than the service's."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class RunningService:
    url: str
    key: str
    token: str
    workspace_id: int
    data_dir: Path | None = None  # the embedded mode's; None: the test's PostgreSQL

    def stored(self) -> str:
        """Everything the service's database holds, as text (SQLite's files, or a data dump)."""
        if self.data_dir is not None:
            files = sorted(self.data_dir.glob("*.sqlite3*"))
            return b"".join(path.read_bytes() for path in files).decode("utf-8", "replace")
        db = connection.settings_dict
        return subprocess.run(  # noqa: S603
            [shutil.which("pg_dump") or "pg_dump", "-h", db["HOST"] or "127.0.0.1",
             "-p", str(db["PORT"] or 5432), "-U", db["USER"] or "postgres", "--data-only",
             db["NAME"]],
            check=True, capture_output=True, text=True, timeout=120,
        ).stdout  # fmt: skip

    def diagnosis(self) -> str:
        """What a failed wait needs to tell a lost call from a late score (production mode,
        whose database is the test's): the events as stored, the change log scoring reads, the
        scoring state, the account scores, the drops and what still waits to be drained."""
        if self.data_dir is not None:
            return ""
        queries = {
            "events": "SELECT name, user_id, account_id, timestamp FROM engagement_event "
            "ORDER BY timestamp",
            "activity": "SELECT applied_at, user_ids, account_ids FROM engagement_eventactivity "
            "ORDER BY id",
            "state": "SELECT scored_through, window_end, refreshed_at FROM engagement_scoringstate",
            "account scores": "SELECT account_id, score_breakdown, computed_at "
            "FROM engagement_accountscore",
            "drops": "SELECT endpoint, reason, detail FROM ingestion_droppedrequest",
            "waiting": "SELECT id, received_at, endpoint FROM ingestion_acceptedrequest",
        }
        lines = [f"now {datetime.now(UTC).isoformat()}"]
        with connection.cursor() as cursor:
            for label, sql in queries.items():
                cursor.execute(sql)
                lines.append(f"{label}: {cursor.fetchall()!r}")
        return "\n".join(lines)

    def read(self, path: str) -> dict:
        auth = {"Authorization": f"Bearer {self.token}"}
        status, body = http("GET", f"{self.url}{path}", headers=auth)
        assert status == 200, (path, status, body[:300])
        return json.loads(body)


def _create_product(env: dict) -> dict:
    made = subprocess.run(  # noqa: S603
        [".venv/bin/python", "manage.py", "create_product", "Acme", "--json"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(made.stdout)


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


@contextmanager
def service(mode: str, tmp_path: Path, broker_url: str) -> Iterator[RunningService]:
    """The whole service: `embedded` as `make run` starts it (migrate, then honcho with the
    Procfile, on SQLite and the filesystem broker), `production` as the README's commands do
    (uvicorn, a worker and beat, on the test's PostgreSQL and broker)."""
    port = free_port()
    if mode == "embedded":
        env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
        env |= {
            "DATABASE_URL": "",
            "CELERY_BROKER_URL": "",
            "DATA_DIR": str(tmp_path / "data"),
            "WEB_PORT": str(port),
            "PATH": f"{ROOT / '.venv' / 'bin'}:{env['PATH']}",
        }
        subprocess.run(  # noqa: S603
            [".venv/bin/python", "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=300,
        )
        made = _create_product(env)
        processes = [spawn(["honcho", "start", "-f", "Procfile", "-e", "/dev/null"], env)]
    else:
        env = production_env(broker_url, tmp_path) | {"SCORING_REFRESH_SECONDS": "1"}
        made = _create_product(env)
        processes = [
            spawn(
                [
                    "uvicorn",
                    "config.asgi:application",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--workers",
                    "2",
                    "--loop",
                    "uvloop",
                    "--http",
                    "httptools",
                ],
                env,
            ),
            spawn(
                ["celery", "-A", "config", "worker", "--concurrency", "2", "--loglevel", "WARNING"],
                env,
            ),
            spawn(
                [
                    "celery",
                    "-A",
                    "config",
                    "beat",
                    "--loglevel",
                    "WARNING",
                    "--schedule",
                    str(tmp_path / "beat-schedule"),
                ],
                env,
            ),
        ]
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: http("GET", f"{url}/healthz")[0] == 200, timeout=90)
        yield RunningService(
            url,
            made["ingestion_key"],
            made["api_token"],
            made["workspace_id"],
            tmp_path / "data" if mode == "embedded" else None,
        )
    finally:
        _stop(processes)
