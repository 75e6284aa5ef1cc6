"""PostgreSQL's COPY for many rows of one model: the cheapest write per row there is, and no
Django model or per-value adaptation per row (those cost several times the database's work); and
the same on an event loop for the door's writer (EventLoopCopy)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

import psycopg
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


class EventLoopCopy:
    """PostgreSQL: COPY on an async psycopg connection of the running event loop, for the
    door's group-commit writer: no hand-off to a thread and back for each write, and none of
    Django's per-query layers. One connection, opened on first use with the default database's
    settings and reopened when lost or when the loop is not the one it was opened on; each COPY
    is a transaction of its own (autocommit), committed before `write` returns. Errors come out
    as Django's database exceptions, with psycopg's as their cause, like the ORM's."""

    def __init__(self, table: str, columns: Sequence[str]) -> None:
        names = ", ".join(connection.ops.quote_name(column) for column in columns)
        self.statement = f"COPY {connection.ops.quote_name(table)} ({names}) FROM STDIN"
        self._connection: psycopg.AsyncConnection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def write(self, rows: Iterable[Sequence]) -> None:
        # Django's translation of the driver's errors, as for its own queries (it flags only
        # this thread's Django connection, which the event loop never queries through). A lost
        # connection is closed now: _connected opens another.
        with connection.wrap_database_errors:
            session = await self._connected()
            async with session.cursor().copy(self.statement) as copy:
                for row in rows:
                    await copy.write_row(row)

    async def check(self) -> None:
        """Make sure the connection still works (after a pause: the database may have restarted
        meanwhile); open a new one if it does not."""
        if self._connection is None:
            return
        try:
            await self._connection.execute("SELECT 1")
        except psycopg.Error:
            await self.close()

    def abandon(self) -> psycopg.AsyncConnection | None:
        """Give up the connection (a write on it did not end in time) and return it, for the
        caller to close once that write has ended; the next write opens another."""
        session, self._connection = self._connection, None
        return session

    async def close(self) -> None:
        session, self._connection = self._connection, None
        if session is not None and self._loop is asyncio.get_running_loop():
            await session.close()

    async def _connected(self) -> psycopg.AsyncConnection:
        loop = asyncio.get_running_loop()
        if self._connection is None or self._connection.closed or self._loop is not loop:
            params = connection.get_connection_params()
            params.pop("cursor_factory", None)  # Django's, for its own synchronous cursors
            self._connection = await psycopg.AsyncConnection.connect(**params, autocommit=True)
            self._loop = loop
        return self._connection
