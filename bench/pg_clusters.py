"""Temporary PostgreSQL clusters for a benchmark: a primary and a streaming replica of it, made
with this machine's PostgreSQL binaries in a temporary directory, and stopped and removed at the
end. What docs/scaling.md's read replicas are, on one box: the replica replays the primary's WAL
as a separate server would, so a benchmark can measure the lag a read API on it adds.

    with primary_and_replica(ports=(5440, 5441)) as (primary, replica):
        primary.url("mydb"), replica.url("mydb")

The failover test (tests/config/test_failover.py) makes the replica a synchronous standby
(`primary_settings`), promotes it and stops the primary as a crash would (`stop("immediate")`).

Both clusters run Debian's defaults (128 MB of shared buffers, the primary's WAL sent as it is
flushed). PostgreSQL refuses to run as root: as root the servers run as the `postgres` user.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SERVER_USER = "postgres"


class ClusterError(Exception):
    """A temporary cluster could not be made or started."""


def _bin_dir() -> Path:
    configured = os.environ.get("BENCH_PG_BIN")
    if configured:
        return Path(configured)
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        found = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if (Path(found) / "initdb").exists():
            return Path(found)
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not versions:
        raise ClusterError("no PostgreSQL binaries (initdb) found; set BENCH_PG_BIN")
    return versions[-1].parent


def _run(*command: str) -> None:
    """A server command, as the postgres user when this process is root."""
    prefix = ["runuser", "-u", SERVER_USER, "--"] if os.geteuid() == 0 else []
    result = subprocess.run(
        [*prefix, *command], capture_output=True, text=True, timeout=300, check=False
    )
    if result.returncode != 0:
        raise ClusterError(f"{Path(command[0]).name} failed:\n{result.stderr[-2000:]}")


@dataclass
class Cluster:
    directory: Path
    port: int
    # Server settings given on the command line (`-c name=value`): this cluster's own, not
    # copied into a base backup of it.
    settings: dict[str, str] = field(default_factory=dict)
    started: bool = field(default=False, init=False)

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
        # pg_ctl runs the server through the shell: quoted, as `'*'` must be.
        options += "".join(
            f" -c {name}={shlex.quote(value)}" for name, value in self.settings.items()
        )
        log = self.directory / "server.log"
        pg_ctl = str(_bin_dir() / "pg_ctl")
        _run(pg_ctl, "-D", str(self.directory), "-l", str(log), "-w", "-o", options, "start")
        self.started = True

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server: its postmaster, the children it has reaped and
        those alive now (a backend is its own process group, so a group's times would miss it)."""
        postmaster = int((self.directory / "postmaster.pid").read_text().split()[0])
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                pid, rest = stat.read_text().split(" ", 1)
                fields = rest.rsplit(")", 1)[1].split()
            except (OSError, IndexError, ValueError):
                continue  # the process ended meanwhile
            if int(pid) == postmaster:
                total += sum(int(value) for value in fields[11:15])  # with reaped children
            elif int(fields[1]) == postmaster:  # fields[1]: the parent
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; `immediate`: as a crash would, without a checkpoint, every session
        cut off."""
        if self.started:
            _run(str(_bin_dir() / "pg_ctl"), "-D", str(self.directory), "-m", mode, "-w", "stop")
            self.started = False

    def rebuild_as_standby_of(
        self, primary: Cluster, settings: dict[str, str] | None = None
    ) -> None:
        """Stop this cluster, replace its files with a base backup of `primary` and start it
        as `primary`'s hot standby, with `settings` (none of its former ones): how an old
        primary rejoins after a failover."""
        self.stop()
        shutil.rmtree(self.directory)
        _run(
            str(_bin_dir() / "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-p",
            str(primary.port),
            "-D",
            str(self.directory),
            "-R",
            "-c",
            "fast",
        )
        self.settings = dict(settings or {})
        self.start()

    def promote(self) -> None:
        """A standby becomes a primary (what Patroni or a managed service does on failover);
        returns once it accepts writes."""
        _run(str(_bin_dir() / "pg_ctl"), "-D", str(self.directory), "-w", "promote")


@contextlib.contextmanager
def primary_and_replica(
    *, ports: tuple[int, int], primary_settings: dict[str, str] | None = None
) -> Iterator[tuple[Cluster, Cluster]]:
    """A new primary cluster on the first port and a streaming replica of it (hot standby,
    `pg_basebackup -R`) on the second; both stopped and their files removed on exit.
    `primary_settings`: server settings of the primary alone (e.g. synchronous_standby_names)."""
    root = Path(tempfile.mkdtemp(prefix="eds-bench-clusters-"))
    if os.geteuid() == 0:
        shutil.chown(root, SERVER_USER, SERVER_USER)
    primary = Cluster(root / "primary", ports[0], dict(primary_settings or {}))
    replica = Cluster(root / "replica", ports[1])
    try:
        initdb = str(_bin_dir() / "initdb")
        _run(initdb, "-D", str(primary.directory), "-U", "postgres", "-A", "trust", "--no-sync")
        primary.start()
        basebackup = [str(_bin_dir() / "pg_basebackup"), "-h", "127.0.0.1", "-U", "postgres"]
        _run(*basebackup, "-p", str(primary.port), "-D", str(replica.directory), "-R", "-c", "fast")
        replica.start()
        yield primary, replica
    finally:
        for cluster in (replica, primary):
            with contextlib.suppress(ClusterError):
                cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


class ReplicaWatch:
    """While running, every `interval` seconds: how far the replica is behind the primary (on
    the primary: the time from flushing WAL to the replica having replayed it,
    `pg_stat_replication.replay_lag`, empty while nothing is pending; and the bytes not yet
    replayed), and how many sessions the replica holds in `database` (the read API's: proof
    that its reads go there; its statistics counters lag by up to 10 s, sessions do not)."""

    def __init__(
        self, primary: Cluster, replica: Cluster, database: str, *, interval: float = 0.2
    ) -> None:
        self.primary = primary
        self.replica = replica
        self.database = database
        self.interval = interval
        self.lag_seconds: list[float] = []
        self.bytes_behind: list[int] = []
        self.replica_sessions = 0  # the most seen at once
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> ReplicaWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _sample(self) -> None:
        import psycopg

        with (
            psycopg.connect(self.primary.url("postgres"), autocommit=True) as primary,
            psycopg.connect(self.replica.url("postgres"), autocommit=True) as replica,
        ):
            while not self._stop.wait(self.interval):
                for lag, behind in primary.execute(
                    "SELECT EXTRACT(EPOCH FROM replay_lag)::float8, "
                    "pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint "
                    "FROM pg_stat_replication"
                ).fetchall():
                    if lag is not None:
                        self.lag_seconds.append(lag)
                    if behind is not None:
                        self.bytes_behind.append(behind)
                (sessions,) = replica.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
                    (self.database,),
                ).fetchone()
                self.replica_sessions = max(self.replica_sessions, sessions)
