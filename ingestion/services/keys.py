"""Ingestion keys: created for a product, revoked (requests sent after that are dropped)."""

from __future__ import annotations

from django.utils import timezone

from ingestion.models import IngestionKey


def ingestion_key_create(*, product_id: int, label: str = "") -> IngestionKey:
    return IngestionKey.objects.create(product_id=product_id, label=label)


def ingestion_key_revoke(*, key_id: int) -> IngestionKey:
    key = IngestionKey.objects.get(id=key_id)
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key
