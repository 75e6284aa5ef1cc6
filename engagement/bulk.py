"""Set-based writes for the apply path: one statement for many rows, never one per row.

Django's bulk_update builds a CASE expression per row and field, and per-value adaptation of a
many-row VALUES list costs more than the database's own work; together they were most of the
worker's time. Here rows reach the database as a subquery with columns c0, c1, ..., which the
database backend builds (engagement/backends): `unnest()` over one typed array per column on
PostgreSQL, so a statement of any size is parsed once and psycopg adapts the values in C; a
multi-row VALUES list on SQLite. The statements around that subquery are the same SQL on both.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence

from django.db import connection, models

from engagement.backends import database_backend


def _field(model: type[models.Model], name: str) -> models.Field:
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field) or field.column is None:
        raise ValueError(f"{model.__name__}.{name} is not a column")
    return field


def _fields(model: type[models.Model], columns: Sequence[str]) -> list[models.Field]:
    return [_field(model, name) for name in columns]


def _chunks(rows: Sequence, size: int) -> Iterable[Sequence]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def _sources(
    model: type[models.Model], columns: Sequence[str], rows: Sequence[Sequence]
) -> Iterator[tuple[str, list]]:
    """The rows as subqueries with columns c0, c1, ... and their parameters, a chunk each."""
    fields = _fields(model, columns)
    backend = database_backend()
    for chunk in _chunks(rows, backend.bulk_rows):
        yield backend.bulk_source(fields, chunk)


def _quote(model: type[models.Model], name: str) -> str:
    return connection.ops.quote_name(str(_field(model, name).column))


def _insert(model, columns, rows, conflict_clause: str) -> None:
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(_quote(model, name) for name in columns)
    selected = ", ".join(f"eds_new.c{index}" for index in range(len(columns)))
    with connection.cursor() as cursor:
        for source, params in _sources(model, columns, rows):
            # `WHERE true` settles SQLite's parse of INSERT ... SELECT ... ON CONFLICT.
            cursor.execute(
                f"INSERT INTO {table} ({names}) SELECT {selected} FROM {source} AS eds_new "  # noqa: S608
                f"WHERE true {conflict_clause}",
                params,
            )


def insert_ignoring_conflicts(
    model: type[models.Model], columns: Sequence[str], rows: Sequence[Sequence]
) -> None:
    """INSERT the rows; a row that breaks a unique constraint is left out."""
    if rows:
        _insert(model, columns, rows, "ON CONFLICT DO NOTHING")


def upsert(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Sequence[Sequence],
    *,
    conflict: Sequence[str],
    assignments: str,
) -> None:
    """INSERT the rows; on a conflict on `conflict`, apply `assignments` (SQL that may use
    `excluded.<column>` and `<table>.<column>`). Rows go in in the order given: callers sort
    them, so two workers upserting overlapping rows take their locks in one order."""
    if rows:
        keys = ", ".join(_quote(model, name) for name in conflict)
        _insert(model, columns, rows, f"ON CONFLICT ({keys}) DO UPDATE SET {assignments}")


def update_by_id(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Sequence[Sequence],
    *,
    assignments: str | None = None,
) -> None:
    """UPDATE rows identified by their id (the first value of each row): each column takes its
    new value, or `assignments` says how (SQL using eds_new.c1, eds_new.c2, ... for the values)."""
    if not rows:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    assignments = assignments or ", ".join(
        f"{_quote(model, name)} = eds_new.c{index}" for index, name in enumerate(columns, start=1)
    )
    with connection.cursor() as cursor:
        for source, params in _sources(model, ["id", *columns], rows):
            cursor.execute(
                f"UPDATE {table} SET {assignments} FROM {source} AS eds_new "  # noqa: S608
                f"WHERE {table}.id = eds_new.c0",
                params,
            )


def insert(model: type[models.Model], columns: Sequence[str], rows: Sequence[Sequence]) -> None:
    """INSERT the rows. (On PostgreSQL the event store COPYs instead: event_store.py.)"""
    if rows:
        _insert(model, columns, rows, "")


def select_in(
    model: type[models.Model],
    columns: Sequence[str],
    *,
    product_id: int,
    tracking_ids: Collection[str],
    lock: bool,
) -> list[tuple]:
    """Rows of one product by tracking id, in id order; locked FOR UPDATE when `lock` (in id
    order, so two workers locking overlapping rows cannot deadlock)."""
    if not tracking_ids:
        return []
    return database_backend().select_in(
        model, columns, product_id=product_id, tracking_ids=tracking_ids, lock=lock
    )


def execute(sql: str, params: Sequence) -> int:
    """One statement the same on both databases (fixed SQL, values as parameters); the rows it
    changed."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return max(cursor.rowcount, 0)
