"""The directory where every process writes its metrics (PROMETHEUS_MULTIPROC_DIR), kept
tidy. No Django and no prometheus_client here: gunicorn's master calls this before it forks."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def multiprocess_dir_prepare(directory: Path) -> None:
    """Create the directory, and remove the files of processes that no longer run: a previous
    run's dead workers. Files of running processes (e.g. celery workers started first) stay."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.glob("*.db"):
        pid = path.stem.rpartition("_")[2]
        if pid.isdigit() and not _process_alive(int(pid)):
            path.unlink(missing_ok=True)


def multiprocess_dir_empty(directory: Path) -> None:
    """Remove every file of the directory (tests; a deployment that stops all processes)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
