"""Django's migrate, with a bound on how long each statement waits for a lock on PostgreSQL.

Migrations run while the door accepts (docs/deployment.md, "Upgrading in place"). A statement
that needs a table lock another transaction holds (ALTER TABLE on a table a long scoring
transaction reads, say) waits for it, and every later reader and writer of that table, the
door's inserts included, queues behind the waiting statement. With `lock_timeout` it gives up
after MIGRATION_LOCK_TIMEOUT_SECONDS instead: the migration fails (an atomic one rolls back
whole), the door never stalls longer than that, and `migrate` is simply run again.

CREATE/DROP INDEX CONCURRENTLY and VALIDATE CONSTRAINT are exempt: their lock lets reads and
writes go on, and they wait for every older transaction by design, which a short limit would
turn into a failure that leaves an invalid index behind.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError
from django.core.management.commands import migrate
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections, transaction

from engagement.backends import database_backend

# Statements that take a table lock stronger than a reader's or writer's own.
_DDL = re.compile(
    r"^\s*(ALTER|CREATE|DROP|LOCK|TRUNCATE|COMMENT|REINDEX|CLUSTER|GRANT|REVOKE)\b", re.IGNORECASE
)
# Statements whose lock lets reads and writes go on (and that cannot run in a transaction).
_WAIT_WITHOUT_LIMIT = re.compile(r"\bCONCURRENTLY\b|\bVALIDATE\s+CONSTRAINT\b", re.IGNORECASE)
_LOCK_NOT_AVAILABLE = "55P03"


class LockTimeout:
    """An execute wrapper that gives each schema statement a `lock_timeout`, with SET LOCAL in
    its transaction (a statement a non-atomic migration sends on its own gets a transaction of
    its own for it): nothing outlives the transaction, so `migrate` may go through a transaction
    pooler without leaving a limit on a server session someone else is lent next."""

    def __init__(self, seconds: int) -> None:
        self.limit = f"{seconds}s"

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict
    ) -> Any:
        text = str(sql)
        if not _DDL.match(text):
            return execute(sql, params, many, context)
        connection = context["connection"]
        unlimited = bool(_WAIT_WITHOUT_LIMIT.search(text[:400]))
        if not connection.in_atomic_block:
            if unlimited:
                return execute(sql, params, many, context)
            with transaction.atomic(using=connection.alias):
                self._set_local(context, self.limit)
                return execute(sql, params, many, context)
        self._set_local(context, "0" if unlimited else self.limit)
        return execute(sql, params, many, context)

    @staticmethod
    def _set_local(context: dict, value: str) -> None:
        # On the driver's cursor: the statement is this wrapper's, not one to wrap again.
        context["cursor"].cursor.execute(f"SET LOCAL lock_timeout = '{value}'")


class Command(migrate.Command):
    help = (
        migrate.Command.help + " On PostgreSQL a schema statement waits for a lock at most"
        " MIGRATION_LOCK_TIMEOUT_SECONDS."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        connection = connections[options.get("database") or DEFAULT_DB_ALIAS]
        seconds = settings.MIGRATION_LOCK_TIMEOUT_SECONDS
        if not database_backend().locks_time_out or not seconds:
            super().handle(*args, **options)
            return
        bound = LockTimeout(seconds)
        try:
            with connection.execute_wrapper(bound):
                super().handle(*args, **options)
        except OperationalError as error:
            if getattr(error.__cause__, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
                raise
            raise CommandError(
                f"A lock was not granted within {seconds} s (MIGRATION_LOCK_TIMEOUT_SECONDS): "
                "another transaction holds the table. The migration in progress was stopped "
                "(rolled back whole unless it is marked non-atomic); run migrate again, or find "
                f"the long transaction in pg_stat_activity. ({error})"
            ) from error
