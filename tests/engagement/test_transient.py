"""Which database errors an erasure tries again (engagement.transient): real errors from real
sessions, never built by hand."""

import sqlite3

import psycopg
import pytest
from django.db import DataError, IntegrityError, OperationalError, connection, transaction

from engagement.models import Product
from engagement.transient import is_transient
from tests.conftest import other_session

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def raised_by(statement: str, params: list | None = None) -> Exception:
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, params)
    except Exception as error:  # noqa: BLE001 - the error is what the test looks at
        return error
    raise AssertionError("no error")


@pytest.mark.postgresql
def test_a_lock_timeout_is_transient(transactional_db, acme):
    with other_session() as other:
        other.execute(
            "SELECT id FROM engagement_product WHERE id = %s FOR UPDATE", [acme.product.id]
        )
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '50ms'")
        error = raised_by(
            "SELECT id FROM engagement_product WHERE id = %s FOR UPDATE", [acme.product.id]
        )
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")

    assert isinstance(error, OperationalError)
    assert isinstance(error.__cause__, psycopg.errors.LockNotAvailable)
    assert is_transient(error)


@pytest.mark.postgresql
def test_refused_values_and_bugs_are_not(acme):
    duplicate = raised_by(
        "INSERT INTO engagement_product (id, name, created_at) SELECT id, name, created_at "
        "FROM engagement_product WHERE id = %s",
        [acme.product.id],
    )
    assert isinstance(duplicate, IntegrityError) and not is_transient(duplicate)
    division = raised_by("SELECT 1 / 0")
    assert isinstance(division, DataError) and not is_transient(division)
    assert not is_transient(ValueError("a bug"))
    assert Product.objects.filter(id=acme.product.id).exists()


def test_sqlites_locked_database_is_transient_and_a_missing_table_is_not(tmp_path):
    path = tmp_path / "db.sqlite3"
    holder = sqlite3.connect(path, timeout=0, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)

    def django_error(statement: str) -> OperationalError:
        try:
            try:
                other.execute(statement)
            except sqlite3.OperationalError as error:  # as Django wraps its driver's errors
                raise OperationalError(*error.args) from error
        except OperationalError as wrapped:
            return wrapped
        raise AssertionError("no error")

    assert is_transient(django_error("BEGIN IMMEDIATE"))  # "database is locked"
    assert not is_transient(django_error("SELECT * FROM missing"))
    holder.close()
    other.close()
