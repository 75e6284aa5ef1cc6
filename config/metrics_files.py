"""The directory where every process writes its metrics (PROMETHEUS_MULTIPROC_DIR), kept
tidy. No Django here: each web worker calls this when uvicorn starts and stops it (the ingestion
door's lifespan), before it has counted anything."""

from __future__ import annotations

import os
from pathlib import Path


def multiprocess_dir_prepare(directory: Path) -> None:
    """Create the directory, and remove the files of processes that no longer run: a previous
    run's dead workers. Files of running processes (e.g. celery workers started first) stay."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.glob("*.db"):
        pid = path.stem.rpartition("_")[2]
        if pid.isdigit() and not _process_alive(int(pid)):
            path.unlink(missing_ok=True)


# The pid of the server (uvicorn's supervisor, or uvicorn itself with one worker) whose workers
# write here; a worker that finds another one recorded (or none) starts a new run.
_SERVER_FILE = "server.pid"


def web_worker_started(directory: Path, server_pid: int) -> None:
    """A web worker starts. In a new run of the server, the previous run's dead workers' files
    go (`multiprocess_dir_prepare`); within a run, a worker the server replaced keeps its files,
    so its counts still add up in /metrics."""
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / _SERVER_FILE
    try:
        recorded = int(marker.read_text())
    except (OSError, ValueError):
        recorded = None
    if recorded != server_pid:
        multiprocess_dir_prepare(directory)
        marker.write_text(str(server_pid))


def web_worker_stopped(pid: int) -> None:
    """A web worker stops: its files are marked dead (its counts still add up)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
