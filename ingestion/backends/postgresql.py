"""Ingestion on PostgreSQL: COPY into the store and the drop log, the claim listed in the
session's claim table (ingestion/session_tables.py), tracks staged in SQL from their stored
rows (ingestion/services/staging.py), the tally counted from the claim in SQL, and the drain's
commit not waiting for the WAL flush (safe: its rows come back should it be lost)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.db import connection

from engagement.erasure_hooks import ErasureTarget
from ingestion import erasure, store, tally
from ingestion.backends import IngestionBackend
from ingestion.models import AcceptedRequest, DroppedRequest
from ingestion.pg_copy import EventLoopCopy
from ingestion.services import apply, drops, queue


class PostgresIngestion(IngestionBackend[queue.SessionClaim]):
    vendor = "postgresql"
    copy_commits_alone = True
    applies_through_staging = True
    drains_beside = True

    def accepted_rows_write(self, rows: list[store.StoredRow]) -> None:
        store.copy_stored_rows(rows)

    def event_loop_writer(self) -> EventLoopCopy:
        return EventLoopCopy(AcceptedRequest._meta.db_table, store.StoredRow._fields)

    def requests_claim(self, limit: int) -> queue.SessionClaim:
        return queue.claim_in_session_table(limit)

    def claimed_delete(self, batch: queue.SessionClaim) -> None:
        queue.claimed_delete_in_session_table(batch)

    def requests_apply_together(
        self,
        product_id: int,
        requests: Sequence[queue.ClaimedRequest],
        under_keys: queue.ClaimedUnderKeys | None,
        turn: Callable[[], None],
    ) -> None:
        apply.apply_staged(product_id, requests, under_keys, turn)

    def earlier_drains_wait(self, batch: queue.SessionClaim) -> None:
        queue.earlier_drains_wait_in_session(batch)

    def accepted_tally(self, batch: queue.SessionClaim) -> None:
        tally.accepted_minutes_record_claimed(batch.claim)

    def drain_commit_relaxed(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")

    def drops_record(self, found: list[DroppedRequest]) -> None:
        drops.drops_copy(found)

    def waiting_rows(self, target: ErasureTarget, digests: list[str]) -> list[tuple[int, list]]:
        return erasure.waiting_rows_matching(target, digests)
