"""One database backend per database, chosen in one place: no other module reads the vendor."""

import re
from pathlib import Path

import pytest
from django.db import connection

from engagement.backends import database_backend

pytestmark = pytest.mark.both_databases
ROOT = Path(__file__).resolve().parents[2]
# The two places that choose (engagement's backend and ingestion's); migrations describe schema.
CHOOSERS = {"engagement/backends/__init__.py", "ingestion/backends/__init__.py"}
READS_VENDOR = re.compile(r"connection\.vendor\b(?!_)|\.vendor\s*[!=]=")


def test_no_module_but_the_choosers_reads_the_database_vendor():
    readers = [
        path.relative_to(ROOT).as_posix()
        for app in ("engagement", "ingestion", "readapi", "marketplace", "dashboard", "automations")
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
        and path.relative_to(ROOT).as_posix() not in CHOOSERS
        and READS_VENDOR.search(path.read_text())
    ]
    assert readers == []


# The dialect's flag, read to choose a statement (`sql.postgres`, `dialect.postgres`).
READS_DIALECT_VENDOR = re.compile(r"\.postgres\b")
# The dialect spells expressions per database; the backends hold each database's statements.
SPELLERS = {"engagement/scoring/dialect.py"}


def test_no_module_but_the_backends_and_the_dialect_chooses_sql_by_database():
    """The scoring and history modules read as one algorithm: where PostgreSQL and SQLite run a
    step differently, the step is a DatabaseBackend method (engagement/backends)."""
    choosers = [
        path.relative_to(ROOT).as_posix()
        for app in ("engagement", "ingestion", "readapi", "marketplace", "dashboard", "automations")
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
        and "backends" not in path.parts
        and path.relative_to(ROOT).as_posix() not in SPELLERS
        and READS_DIALECT_VENDOR.search(path.read_text())
    ]
    assert choosers == []


def test_the_backend_is_the_databases_own(db):
    backend = database_backend()
    expected = "postgresql" if connection.vendor == "postgresql" else "sqlite"
    assert backend.vendor == expected
    assert backend.dialect.postgres is (expected == "postgresql")
    assert database_backend() is backend  # chosen once
