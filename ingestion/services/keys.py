"""Ingestion keys: created for a product, revoked (requests sent after that are dropped)."""

from __future__ import annotations

from django.utils import timezone

from ingestion.models import IngestionKey


def ingestion_key_create(
    *, product_id: int, label: str = "", allowed_origins: str = ""
) -> IngestionKey:
    key = IngestionKey(product_id=product_id, label=label, allowed_origins=allowed_origins)
    key.full_clean(exclude=["key", "digest", "product"])
    key.save()
    return key


def ingestion_key_origins_set(*, key_id: int, allowed_origins: str) -> IngestionKey:
    """Set a key's origin allowlist (one origin a line; empty: any); every web process applies
    it within ingestion.key_checks.ORIGINS_TTL_SECONDS."""
    key = IngestionKey.objects.get(id=key_id)
    key.allowed_origins = allowed_origins
    key.full_clean(exclude=["key", "digest", "product"])
    key.save(update_fields=["allowed_origins"])
    return key


def ingestion_key_revoke(*, key_id: int) -> IngestionKey:
    key = IngestionKey.objects.get(id=key_id)
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


def product_key_origins_set(product_id: int, key_id: int, allowed_origins: str) -> None:
    """`ingestion_key_origins_set` for a key of this product only (LookupError otherwise): what
    the dashboard calls through engagement.health."""
    if not IngestionKey.objects.filter(id=key_id, product_id=product_id).exists():
        raise LookupError(f"no key {key_id} in product {product_id}")
    ingestion_key_origins_set(key_id=key_id, allowed_origins=allowed_origins)
