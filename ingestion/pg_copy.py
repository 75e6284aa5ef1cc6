"""PostgreSQL's COPY for many rows of one model: the cheapest write per row there is, and no
Django model or per-value adaptation per row (those cost several times the database's work)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import connection, models


def copy_rows(model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence]) -> None:
    """COPY `rows` (values in the order of `columns`, column names) into `model`'s table, inside
    the current transaction or, in autocommit, as a transaction of its own. PostgreSQL only."""
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(column) for column in columns)
    statement = f"COPY {table} ({names}) FROM STDIN"
    # The raw psycopg cursor's errors are translated into Django's, like any other query's.
    with (
        connection.cursor() as cursor,
        connection.wrap_database_errors,
        cursor.cursor.copy(statement) as copy,
    ):
        for row in rows:
            copy.write_row(row)
