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


def test_the_backend_is_the_databases_own(db):
    backend = database_backend()
    expected = "postgresql" if connection.vendor == "postgresql" else "sqlite"
    assert backend.vendor == expected
    assert backend.dialect.postgres is (expected == "postgresql")
    assert database_backend() is backend  # chosen once
