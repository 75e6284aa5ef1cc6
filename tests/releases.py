"""The previous release of this repository, for the upgrade test and the migration checker: its
commit (the tag, or the tag's commit in a clone fetched without tags), the migrations it shipped,
and its tree materialised in a directory without touching the working tree or the index."""

import io
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREVIOUS_RELEASE_TAG = "v0.1.0"
PREVIOUS_RELEASE_COMMIT = "9b94405c5b88d0c85f01c567eee5f0e593e5da92"
APPS = ("engagement", "ingestion", "readapi", "marketplace", "automations", "dashboard", "config")


def _git(*args: str) -> bytes:
    return subprocess.run(  # noqa: S603
        ["git", *args],
        cwd=ROOT,
        capture_output=True,
        check=True,  # noqa: S607
    ).stdout


def previous_release() -> str:
    """The commit of the previous release. Fails (never skips) when the clone has neither the tag
    nor the commit: a shallow clone cannot show that an upgrade keeps data."""
    for name in (PREVIOUS_RELEASE_TAG, PREVIOUS_RELEASE_COMMIT):
        try:
            return _git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}").decode().strip()
        except (subprocess.CalledProcessError, FileNotFoundError):
            continue
    raise AssertionError(
        f"Neither the tag {PREVIOUS_RELEASE_TAG} nor its commit {PREVIOUS_RELEASE_COMMIT} is in "
        f"the git repository at {ROOT}: fetch the full history (git fetch --unshallow --tags)."
    )


def released_migrations(commit: str) -> set[tuple[str, str]]:
    """(app, migration name) of every migration the release shipped."""
    names = _git("ls-tree", "-r", "--name-only", commit, "--", *APPS).decode().split()
    released = set()
    for name in names:
        parts = Path(name).parts
        if len(parts) == 3 and parts[1] == "migrations" and parts[2][:4].isdigit():
            released.add((parts[0], parts[2].removesuffix(".py")))
    return released


def materialise(commit: str, directory: Path) -> Path:
    """The release's tree in `directory` (git archive, as a release tarball holds it)."""
    archive = _git("archive", "--format=tar", commit)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(directory, filter="data")
    return directory
