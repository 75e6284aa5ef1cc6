"""Database routing: the read API reads from a replica when DATABASE_REPLICA_URL is set.

Only reads made while a read API request is being answered go to the replica (`replica_reads`
marks that span): the ingestion workers, scoring and the admin read what they have just written,
so they stay on the primary. Writes always go to the primary. The token check of the read API
reads the primary too (readapi.authentication), so a revoked token stops working at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import DEFAULT_DB_ALIAS

REPLICA_ALIAS = "replica"

_replica_reads: ContextVar[bool] = ContextVar("eds_replica_reads", default=False)


@contextmanager
def replica_reads() -> Iterator[None]:
    """Reads inside this block may be served by the replica (when one is configured)."""
    token = _replica_reads.set(True)
    try:
        yield
    finally:
        _replica_reads.reset(token)


class ReadApiReplicaRouter:
    def db_for_read(self, model: type, **hints: object) -> str | None:
        return REPLICA_ALIAS if _replica_reads.get() else None

    def db_for_write(self, model: type, **hints: object) -> str | None:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: object, obj2: object, **hints: object) -> bool:
        return True  # the replica holds the same rows as the primary

    def allow_migrate(self, db: str, app_label: str, **hints: object) -> bool:
        return db == DEFAULT_DB_ALIAS
