"""Every test module that applies or scores data runs on both databases, or says why not.

`make test` runs the modules marked `both_databases` a second time on SQLite (the embedded mode).
A module that calls the drain, the apply service, a score refresh or the history is held to that
here, so a new module cannot quietly run on PostgreSQL alone: it is marked `both_databases`, or
`postgresql` (it needs the server itself) or `e2e` (it starts real processes)."""

import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent
APPLIES_OR_SCORES = re.compile(
    r"accepted_requests_drain|messages_apply|workspace_refresh|workspace_rescore"
    r"|score_history_update|account_prefixed_traits_replace|\bdrain\("
)
MARKED = re.compile(r"pytest\.mark\.(both_databases|postgresql|e2e)")
# Pages and admin screens read data a fixture applied; their subject is the page, not the data.
READERS = {"config", "dashboard"}


def test_every_module_that_applies_or_scores_data_is_marked_for_both_databases():
    unmarked = [
        str(path.relative_to(TESTS))
        for path in sorted(TESTS.glob("*/test_*.py"))
        if path.parent.name not in READERS
        and APPLIES_OR_SCORES.search(path.read_text())
        and not MARKED.search(path.read_text())
    ]
    assert unmarked == []


def _collect(*args: str, **env: str) -> subprocess.CompletedProcess:
    """`pytest --collect-only` as someone typing plain `pytest` would run it: no DATABASE_URL
    and no CELERY_BROKER_URL unless given."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("DATABASE_URL", "CELERY_BROKER_URL")
        and not name.startswith(("PYTEST_", "DJANGO_"))
    }
    environment.update(env)
    return subprocess.run(  # noqa: S603 (fixed arguments)
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=TESTS.parent,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_plain_pytest_on_the_embedded_defaults_says_what_the_selected_tests_need():
    failover = "tests/config/test_failover.py"

    on_sqlite = _collect(failover)
    assert on_sqlite.returncode == 4  # pytest's usage error, before any test runs
    assert "need PostgreSQL (DATABASE_URL is not set" in on_sqlite.stderr
    assert "and a real broker (CELERY_BROKER_URL is 'filesystem://localhost/')" in on_sqlite.stderr
    assert "make test" in on_sqlite.stderr

    without_them = _collect(failover, "-m", "not postgresql and not e2e")
    assert without_them.returncode == 5, without_them.stderr  # nothing selected, no complaint


def test_a_postgresql_run_with_the_file_broker_refuses_only_the_tests_that_start_workers():
    database = {"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/eds"}

    workers = _collect("tests/ingestion/test_e2e_worker.py", **database)
    assert workers.returncode == 4
    assert "need a real broker (CELERY_BROKER_URL is 'filesystem://localhost/')" in workers.stderr
    assert "PostgreSQL" not in workers.stderr.split("need", 1)[1].split(".", 1)[0]

    no_workers = _collect("tests/test_markers.py", **database)
    assert no_workers.returncode == 0, no_workers.stderr
