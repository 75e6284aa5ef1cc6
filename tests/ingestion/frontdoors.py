"""The ingestion door over real HTTP: uvicorn on uvloop and httptools, in a thread of the test
process (so it shares the test database) or as its own process as production runs it, plus a
tiny HTTP client that shows exactly what a client would see."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import uvicorn
from django.conf import settings
from django.core.asgi import get_asgi_application

from ingestion.asgi import IngestionFrontDoor
from tests.processes import database_url


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    content: bytes

    def json(self):
        return json.loads(self.content)


def request(
    base_url: str,
    method: str,
    path: str,
    body: bytes | str | dict | list | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    if isinstance(body, dict | list):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode("utf-8")
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        all_headers = {"Content-Type": "application/json"} if body is not None else {}
        all_headers.update(headers or {})
        connection.request(method, path, body=body, headers=all_headers)
        response = connection.getresponse()
        return Reply(
            status=response.status,
            headers={name.lower(): value for name, value in response.getheaders()},
            content=response.read(),
        )
    finally:
        connection.close()


class AsgiDoor:
    """The ASGI front door under uvicorn in a background thread, on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        self.app = IngestionFrontDoor(get_asgi_application())
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(
            self.app, loop="uvloop", http="httptools", lifespan="on", log_level="warning"
        )
        self.server = uvicorn.Server(config)
        # Server.run, not asyncio.run(serve()): it runs the configured loop (uvloop), as the
        # production command does. On asyncio's own loop these sockets kept Nagle's algorithm,
        # and every answer's body waited 40 ms for the client's delayed ACK of its headers.
        self.thread = threading.Thread(
            target=lambda: self.server.run(sockets=[self.sock]), daemon=True
        )

    def start(self) -> AsgiDoor:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True  # lifespan shutdown flushes the writer
        self.thread.join(timeout=10)
        self.sock.close()


def serve_in_subprocess(port: int, env: dict[str, str]) -> subprocess.Popen:
    """Start the service as production runs it (a separate process)."""
    root = Path(__file__).resolve().parents[2]
    command = [
        str(Path(sys.executable).parent / "uvicorn"),
        "config.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    return subprocess.Popen(command, cwd=root, env=env, start_new_session=True)


def wait_for_http(
    url: str, server: subprocess.Popen, path: str = "/healthz", seconds: float = 30
) -> None:
    """Wait until the server answers anything at all over HTTP."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("the server exited")
        try:
            request(url, "GET", path)
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the server did not start")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url_of_tests() -> str:
    """The test database as a DATABASE_URL, for a server process of its own."""
    return database_url(settings.DATABASES["default"])
