"""The read API on processes of its own (docs/scaling.md): Debian's nginx, run with the two files
the documentation gives, sends every ingestion path to the door's port and nothing else.

Two stand-in servers take the ports the documentation names and answer with which one they are,
so the test reads where nginx routed each request. The pattern is compared with the door's own
paths (`ingestion.acceptance.endpoints.ENDPOINTS`): an endpoint added to the door and not to the
documentation, or the other way round, fails here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ingestion.acceptance.endpoints import ENDPOINTS
from tests.processes import ROOT, free_port

pytestmark = pytest.mark.e2e

DOC = ROOT / "docs" / "scaling.md"
SECTION = ("### The read API on processes of its own", "## Past one machine")
DOOR_PORT, READS_PORT = "127.0.0.1:8000", "127.0.0.1:8001"  # as the documentation names them


def documented_nginx() -> tuple[str, str]:
    """The section's two nginx files: the upstreams and locations, and eds_proxy.conf."""
    text = DOC.read_text()
    section = text[text.index(SECTION[0]) : text.index(SECTION[1])]
    blocks = re.findall(r"```nginx\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 2, "docs/scaling.md: the section's two nginx blocks"
    return blocks[0], blocks[1]


def nginx_binary() -> str:
    """Debian's nginx; installed when missing, as .ci/run does (its service is never started)."""
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found is None:
        subprocess.run(["apt-get", "update", "-qq"], check=False, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "nginx"], check=False, capture_output=True
        )
        found = "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    if found is None:
        pytest.fail("nginx is not installed and apt-get could not install it")
    return found


class StandIn(ThreadingHTTPServer):
    """Answers every request with its name and what it was asked."""

    daemon_threads = True

    def __init__(self, name: str) -> None:
        self.name = name
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                body = f"{stand_in.name} {self.command} {self.path} {self.headers['Host']}"
                payload = body.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_OPTIONS = do_PUT = _answer  # noqa: N815 (http.server's names)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


@pytest.fixture(scope="module")
def proxy(tmp_path_factory) -> Iterator[str]:
    """nginx with the documented files, the door's and the reads' ports on the stand-ins;
    returns its base URL."""
    routes, proxy_conf = documented_nginx()
    door, reads = StandIn("door"), StandIn("reads")
    directory = tmp_path_factory.mktemp("nginx")
    (directory / "eds_proxy.conf").write_text(proxy_conf)
    port = free_port()
    routes = routes.replace(DOOR_PORT, door.address).replace(READS_PORT, reads.address)
    # The documentation's server block is commented out around its locations: here it is real.
    server_open = "# server { ... listen 443 ssl; ..."
    assert server_open in routes and "# }" in routes
    routes = routes.replace(server_open, f"server {{ listen 127.0.0.1:{port};")
    routes = routes.replace("# }", "}")
    (directory / "nginx.conf").write_text(
        f"""
        # Its workers write large bodies to the temporary directory below, this test's own
        # (run as root, nginx would otherwise switch them to nobody, who may not).
        user root root;
        worker_processes 1;
        error_log {directory}/error.log warn;
        pid {directory}/nginx.pid;
        events {{ worker_connections 64; }}
        http {{
            access_log off;
            client_body_temp_path {directory}/body;
            proxy_temp_path {directory}/proxy;
            fastcgi_temp_path {directory}/fastcgi;
            uwsgi_temp_path {directory}/uwsgi;
            scgi_temp_path {directory}/scgi;
            {routes}
        }}
        """
    )
    nginx = subprocess.Popen(  # noqa: S603
        [
            nginx_binary(),
            "-p",
            str(directory),
            "-c",
            str(directory / "nginx.conf"),
            "-g",
            "daemon off;",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=1).read()  # noqa: S310
                break
            except (urllib.error.URLError, ConnectionError):
                if nginx.poll() is not None or time.monotonic() > deadline:
                    output = nginx.stdout.read().decode() if nginx.stdout else ""
                    pytest.fail(f"nginx did not start:\n{output}")
                time.sleep(0.1)
        yield base
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
        door.shutdown()
        reads.shutdown()


def routed(base: str, method: str, path: str) -> str:
    """Which stand-in answered, after checking it got the request as sent."""
    body = b'{"userId": "u1", "event": "Login"}' if method == "POST" else None
    request = urllib.request.Request(f"{base}{path}", data=body, method=method)
    request.add_header("Host", "eds.example.com")
    with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310
        name, got_method, got_path, host = answer.read().decode().split(" ")
    assert (got_method, got_path, host) == (method, path, "eds.example.com")
    return name


DOOR_PATHS = sorted(f"/{name}{slash}" for name in ENDPOINTS for slash in ("", "/"))


def test_every_path_of_the_door_goes_to_the_door(proxy):
    assert {path: routed(proxy, "POST", path) for path in DOOR_PATHS} == dict.fromkeys(
        DOOR_PATHS, "door"
    )
    # A browser's preflight goes where its request will.
    assert routed(proxy, "OPTIONS", "/v1/batch") == "door"


@pytest.mark.parametrize(
    "path",
    [
        "/v2/users?workspace_id=1",
        "/v2/users/42",
        "/v2/accounts",
        "/v2/accounts/7?workspace_id=1",
        "/v1/users/42",  # not an endpoint: the door takes /v1/users only
        "/v2/track/extra",
        "/v1/trackx",
        "/",
        "/admin/login/",
        "/api/docs/",
        "/healthz",
        "/metrics",
        "/static/eds/dashboard.js",
    ],
)
def test_everything_else_goes_to_the_reads(proxy, path):
    assert routed(proxy, "GET", path) == "reads"


def test_a_large_batch_reaches_the_door_whole(proxy):
    """nginx's own limit (1 MB) is off: the door answers an oversized body itself, with its
    JSON 413, and a batch under its limit arrives whole."""
    request = urllib.request.Request(
        f"{proxy}/v1/batch", data=b"x" * (3 * 1024 * 1024), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        assert answer.read().decode().startswith("door POST /v1/batch")
