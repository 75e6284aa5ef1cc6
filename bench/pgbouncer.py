"""PgBouncer in transaction mode in front of a PostgreSQL server, for tests, benchmarks and CI:
Debian's `pgbouncer` (installed when missing), its configuration written to a directory of its
own, every database of the server passed through (`* = host=... port=...`), auth trust.

    with pgbouncer(port=6432, server_port=5432) as bouncer:    # stopped at the end
        bouncer.url("eds")                     # postgres://postgres@127.0.0.1:6432/eds
        bouncer.errors()                       # the error lines of its log

    .venv/bin/python bench/pgbouncer.py start --port 6432 --dir /tmp/pgbouncer   # stays up
    .venv/bin/python bench/pgbouncer.py stop --dir /tmp/pgbouncer

PgBouncer refuses to run as root: as root it runs as the `postgres` user (as bench/pg_clusters.py
runs PostgreSQL). The configuration is docs/deployment.md's sample with test-sized limits.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

RUN_AS = "postgres"
# Lines of pgbouncer's log that say something went wrong between a client and a server: an
# error passed on to a client, or a server session closed for an unexpected reason.
_ERROR_MARKS = ("ERROR", "FATAL", "WARNING", "closing because: server conn crashed")


class PgBouncerError(Exception):
    """PgBouncer could not be installed or started."""


def binary() -> str:
    """The pgbouncer binary; Debian's package is installed when there is none."""
    found = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    )
    if found:
        return found
    for command in (["apt-get", "install", "-y", "-qq", "pgbouncer"], ["apt-get", "update", "-qq"]):
        subprocess.run(command, check=False, capture_output=True)
        if command[1] == "update":
            subprocess.run(
                ["apt-get", "install", "-y", "-qq", "pgbouncer"], check=False, capture_output=True
            )
        if Path("/usr/sbin/pgbouncer").exists():
            return "/usr/sbin/pgbouncer"
    raise PgBouncerError("pgbouncer is not installed and apt-get could not install it")


@dataclass
class PgBouncer:
    directory: Path
    port: int
    server_host: str = "127.0.0.1"
    server_port: int = 5432
    # Server sessions per database and user: the suite's processes share them.
    pool_size: int = 20
    max_client_conn: int = 400
    # The users clients may connect as (auth trust: by name only); the server's own
    # authentication of them is the server's (trust on this machine).
    users: tuple[str, ...] = ("postgres",)

    @property
    def log(self) -> Path:
        return self.directory / "pgbouncer.log"

    @property
    def pidfile(self) -> Path:
        return self.directory / "pgbouncer.pid"

    def url(self, database: str, user: str = "postgres") -> str:
        return f"postgres://{user}@127.0.0.1:{self.port}/{database}"

    def config(self) -> str:
        return f"""[databases]
* = host={self.server_host} port={self.server_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.directory}/userlist.txt
pool_mode = transaction
default_pool_size = {self.pool_size}
max_client_conn = {self.max_client_conn}
max_prepared_statements = 0
ignore_startup_parameters = extra_float_digits
logfile = {self.log}
pidfile = {self.pidfile}
log_connections = 0
log_disconnections = 0
"""

    def start(self) -> PgBouncer:
        self.directory.mkdir(parents=True, exist_ok=True)
        ini = self.directory / "pgbouncer.ini"
        config = self.config()
        if _version(binary()) < (1, 21):
            # 1.21 added prepared statements in transaction mode; older ones refuse the line.
            config = config.replace("max_prepared_statements = 0\n", "")
        ini.write_text(config)
        (self.directory / "userlist.txt").write_text("".join(f'"{u}" ""\n' for u in self.users))
        as_root = os.geteuid() == 0
        if as_root:
            shutil.chown(self.directory, RUN_AS)
            for path in self.directory.iterdir():
                shutil.chown(path, RUN_AS)
        prefix = ["runuser", "-u", RUN_AS, "--"] if as_root else []
        result = subprocess.run(
            [*prefix, binary(), "-d", "-q", str(ini)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if result.returncode != 0:
            raise PgBouncerError(f"pgbouncer did not start: {result.stderr[-2000:]}")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                return self
            time.sleep(0.05)
        raise PgBouncerError(
            f"pgbouncer is not listening on {self.port}: {self.log_text()[-2000:]}"
        )

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            pid = int(self.pidfile.read_text().strip())
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                os.kill(pid, 0)
                time.sleep(0.05)

    def running(self) -> bool:
        """Whether the pgbouncer of this directory's pidfile is alive."""
        try:
            os.kill(int(self.pidfile.read_text().strip()), 0)
        except (OSError, ValueError):
            return False
        return True

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def errors(self) -> list[str]:
        """The lines of the log that report an error between a client and a server."""
        return [
            line
            for line in self.log_text().splitlines()
            if any(mark in line for mark in _ERROR_MARKS)
        ]


def _version(path: str) -> tuple[int, ...]:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    words = out.split()
    try:
        return tuple(int(part) for part in words[1].split(".")[:2])
    except (IndexError, ValueError):
        return (0,)


@contextlib.contextmanager
def pgbouncer(*, port: int, server_port: int = 5432, **options) -> Iterator[PgBouncer]:
    """A PgBouncer in a temporary directory for the block; stopped and removed after."""
    directory = Path(tempfile.mkdtemp(prefix="eds-pgbouncer-"))
    bouncer = PgBouncer(directory, port, server_port=server_port, **options)
    try:
        yield bouncer.start()
    finally:
        bouncer.stop()
        shutil.rmtree(directory, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--dir", required=True, type=Path, help="its configuration, log, pid")
    parser.add_argument("--port", type=int, default=6432)
    parser.add_argument("--server-host", default="127.0.0.1")
    parser.add_argument("--server-port", type=int, default=5432)
    args = parser.parse_args()
    bouncer = PgBouncer(args.dir, args.port, args.server_host, args.server_port)
    if args.action == "stop":
        bouncer.stop()
        return 0
    if bouncer.running():
        print(f"pgbouncer already runs from {args.dir} on 127.0.0.1:{args.port}")
        return 0
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", args.port), 1):
        print(f"127.0.0.1:{args.port} is taken by something else: stop it or pick another --port")
        return 1
    bouncer.start()
    print(
        f"pgbouncer (transaction mode) on 127.0.0.1:{args.port} -> "
        f"{args.server_host}:{args.server_port}; log {bouncer.log}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
