"""One backend for ingestion's tables, chosen once: the acceptance store's write, the drain's
claim, apply route, tally, commit and delete, the drops' write and erasure's lookup of waiting
messages, each with a PostgreSQL implementation (postgresql.py: COPY, a session table of claimed
rows, SQL staging) and a portable one (portable.py: what SQLite, the embedded mode, runs). No
other module of ingestion reads the database vendor (tests/engagement/test_backends.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from django.db import connection

if TYPE_CHECKING:
    from engagement.erasure_hooks import ErasureTarget
    from ingestion.models import DroppedRequest
    from ingestion.pg_copy import EventLoopCopy
    from ingestion.services.queue import ClaimedBatch, ClaimedRequest, ClaimedUnderKeys
    from ingestion.store import StoredRow

# The claim a backend makes (requests_claim) and is handed back (delete, wait, tally).
Batch = TypeVar("Batch", bound="ClaimedBatch")


class IngestionBackend(Generic[Batch]):
    """The vendor-specific steps of ingestion; the implementations store and apply alike."""

    vendor = ""
    # The store: outside a transaction one write commits on its own (PostgreSQL's COPY), with
    # the same durability and without the round trips of BEGIN and COMMIT.
    copy_commits_alone = False
    # The apply: a batch applied together goes through SQL staging, so a request that fails
    # whole is tried once more the generic way before it is split.
    applies_through_staging = False
    # The drain: other connections may drain beside the caller's, each its own transactions
    # (one writer at a time on SQLite).
    drains_beside = False

    def accepted_rows_write(self, rows: list[StoredRow]) -> None:
        raise NotImplementedError

    def event_loop_writer(self) -> EventLoopCopy | None:
        """A writer of the store's rows for the door's event loop, where the database has an
        async driver (PostgreSQL); None where the door writes on a thread (SQLite)."""
        return None

    def requests_claim(self, limit: int) -> Batch:
        raise NotImplementedError

    def claimed_delete(self, batch: Batch) -> None:
        raise NotImplementedError

    def requests_apply_together(
        self,
        product_id: int,
        requests: Sequence[ClaimedRequest],
        under_keys: ClaimedUnderKeys | None,
        turn: Callable[[], None],
    ) -> None:
        """Apply these requests (or every claimed row under these keys) once `turn` returns."""
        raise NotImplementedError

    def earlier_drains_wait(self, batch: Batch) -> None:
        """Return once the drains holding rows this claim must be applied after have ended
        (there are none where drains never overlap)."""

    def accepted_tally(self, batch: Batch) -> None:
        raise NotImplementedError

    def drain_commit_relaxed(self) -> None:
        """Let the drain's commit return before its WAL reaches disk, where that exists."""

    def drops_record(self, drops: list[DroppedRequest]) -> None:
        raise NotImplementedError

    def waiting_rows(self, target: ErasureTarget, digests: list[str]) -> list[tuple[int, list]]:
        raise NotImplementedError


_chosen: dict[str, IngestionBackend[Any]] = {}


def ingestion_backend() -> IngestionBackend[Any]:
    """The backend of the default connection's database: PostgreSQL, or portable (SQLite)."""
    vendor = connection.vendor
    if vendor not in _chosen:
        if vendor == "postgresql":
            from ingestion.backends.postgresql import PostgresIngestion

            _chosen[vendor] = PostgresIngestion()
        else:
            from ingestion.backends.portable import PortableIngestion

            _chosen[vendor] = PortableIngestion()
    return _chosen[vendor]
