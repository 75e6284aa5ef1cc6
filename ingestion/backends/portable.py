"""Ingestion on SQLite (the embedded mode): rows inserted, claimed and applied as loaded Python
objects, every request of a claim in a `queue.LoadedClaim`; one writer at a time."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engagement.erasure_hooks import ErasureTarget
from ingestion import erasure, store, tally
from ingestion.backends import IngestionBackend
from ingestion.models import DroppedRequest
from ingestion.services import apply, queue


class PortableIngestion(IngestionBackend[queue.LoadedClaim]):
    vendor = "sqlite"

    def accepted_rows_write(self, rows: list[store.StoredRow]) -> None:
        store.insert_stored_rows(rows)

    def requests_claim(self, limit: int) -> queue.LoadedClaim:
        return queue.claim_loaded(limit)

    def claimed_delete(self, batch: queue.LoadedClaim) -> None:
        queue.claimed_delete_loaded(batch)

    def requests_apply_together(
        self,
        product_id: int,
        requests: Sequence[queue.ClaimedRequest],
        under_keys: queue.ClaimedUnderKeys | None,
        turn: Callable[[], None],
    ) -> None:
        apply.apply_loaded(product_id, under_keys.requests() if under_keys else requests, turn)

    def accepted_tally(self, batch: queue.LoadedClaim) -> None:
        tally.accepted_minutes_record((r.key_digest, r.received_at) for r in batch.requests)

    def drops_record(self, found: list[DroppedRequest]) -> None:
        DroppedRequest.objects.bulk_create(found)

    def waiting_rows(self, target: ErasureTarget, digests: list[str]) -> list[tuple[int, list]]:
        return erasure.waiting_rows_loaded(digests)
