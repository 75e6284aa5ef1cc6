"""Ingestion keys, the durable acceptance store, and the record of every dropped request."""

import hashlib
import re
import secrets
import uuid
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models

from engagement.models import Product
from ingestion.acceptance import digest_key

_ORIGIN = re.compile(r"https?://[a-z0-9.-]+(:[0-9]{1,5})?|null")
# An allowlist longer than this is refused whole, never cut: a cut list could end in an origin
# nobody typed (https://app.example.co) that would then be allowed.
MAX_ALLOWED_ORIGINS_CHARACTERS = 10_000


def validate_origins(text: str) -> None:
    """Each line an origin: scheme and host, with a port if not the usual one, nothing more; at
    most MAX_ALLOWED_ORIGINS_CHARACTERS in all."""
    if len(text) > MAX_ALLOWED_ORIGINS_CHARACTERS:
        raise ValidationError(
            f"The allowed origins hold at most {MAX_ALLOWED_ORIGINS_CHARACTERS:,} characters "
            f"(this list has {len(text):,}); nothing was changed.",
            code="too_long",
        )
    for line in text.splitlines():
        origin = line.strip().rstrip("/").lower()
        if origin and not _ORIGIN.fullmatch(origin):
            raise ValidationError(
                f"{line.strip()[:100]!r} is not an origin: write scheme://host[:port], "
                "e.g. https://app.example.com, one per line.",
                code="invalid_origin",
            )


def generate_ingestion_key() -> str:
    # URL-safe characters: '-' and '_' keep a raw key from ever parsing as strict base64. Never
    # first, though: a key beginning with '-' reads as an option on a command line
    # (`trait_sync_create --write-key KEY`), about one key in 64 otherwise.
    while True:
        key = secrets.token_urlsafe(32)
        if key[0].isalnum():
            return key


class IngestionKey(models.Model):
    """One of a product's ingestion keys; several may be active so a key can be rotated."""

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="ingestion_keys")
    label = models.CharField(max_length=100, blank=True, default="")
    key = models.CharField(max_length=128, unique=True, default=generate_ingestion_key)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Browser origins this key's requests may come from, one per line (https://app.example.com);
    # empty: any. A key lives in web pages, so this is what keeps other sites from sending with it.
    allowed_origins = models.TextField(
        blank=True,
        default="",
        validators=[validate_origins],
        help_text="One origin per line, e.g. https://app.example.com. Empty: any origin. "
        "Browsers' requests from other origins are refused (403) before anything is stored.",
    )

    class Meta:
        ordering = ["-created_at"]

    @staticmethod
    def origins_from_text(text: str) -> list[str]:
        """The origins of an allowlist's text, as browsers send them (lower case, no slash)."""
        return [line.strip().rstrip("/").lower() for line in text.splitlines() if line.strip()]

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.digest = digest_key(self.key)
        super().save(*args, **kwargs)

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def fingerprint(self) -> str:
        """What the drop log shows of a key: not secret, enough to tell keys apart."""
        return key_fingerprint(self.digest)

    def __str__(self) -> str:
        return f"{self.key[:6]}… ({self.product})"


def key_fingerprint(key_digest: str) -> str:
    """The first 8 hex digits of a key's SHA-256 digest (the store keeps only the digest)."""
    return key_digest[:8]


class AcceptedRequest(models.Model):
    """Requests answered 202, stored durably until a worker has applied them, then deleted.

    A row is one request, or several under one ingestion key that the ASGI door's group-commit
    writer stored in one write: a worker's cost per row (locking, reading, deleting it) is then
    shared by all of them. `messages` holds only the validated fields the service uses (never
    properties, context or IPs), the requests' messages one after the other.
    """

    # For a row of several requests: the latest of their times (a key revoked before it sends
    # the row down the careful path, which checks each request's own time), and their endpoint
    # when they share one, "several" otherwise.
    received_at = models.DateTimeField()
    endpoint = models.CharField(max_length=32)
    key_digest = models.CharField(max_length=64)
    messages = models.JSONField()
    # len(requests), or 1: kept as a column so the backlog and a claim count requests without
    # reading any JSON. A database default too, so a COPY without the column stores one request.
    request_count = models.PositiveIntegerField(default=1, db_default=1)
    # Null for one request; for several, one [endpoint, received at in Unix microseconds,
    # message count] each, in the order of `messages`, so a drop is still recorded per request.
    requests = models.JSONField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["received_at"], name="accepted_received_idx")]


class DroppedRequest(models.Model):
    """A request (or a batch item) that was answered and then not applied, with the reason."""

    class Reason(models.TextChoices):
        UNKNOWN_KEY = "unknown_key", "Unknown ingestion key"
        REVOKED_KEY = "revoked_key", "Revoked ingestion key"
        INVALID_MESSAGE = "invalid_message", "Invalid message"
        UNSUPPORTED_TYPE = "unsupported_type", "Unsupported message type"
        TIMESTAMP_IN_FUTURE = "timestamp_in_future", "Timestamp too far in the future"
        APPLY_FAILED = "apply_failed", "Failed to apply"
        # For a tracking id erased with suppression (its keyed hash matched).
        SUPPRESSED = "suppressed", "Suppressed (erased tracking id)"
        # Accepted for a user or account erased before a worker applied it.
        ERASED = "erased", "Erased before it was applied"
        # A group call's parent link that would close a cycle or make the chain too deep.
        PARENT_REFUSED = "parent_refused", "Account parent link refused"

    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    endpoint = models.CharField(max_length=32)
    reason = models.CharField(max_length=32, choices=Reason.choices)
    detail = models.CharField(max_length=500, blank=True, default="")
    message_count = models.PositiveIntegerField(default=1)
    # The key the request came with, as IngestionKey.fingerprint shows it: a typo'd key (no
    # product has it) can be told from a revoked one, and from which deployed app it came.
    key_fingerprint = models.CharField(max_length=8, blank=True, default="")
    # For an item left out of a Segment-SDK batch: its position in the batch.
    item_index = models.PositiveIntegerField(null=True, blank=True)
    received_at = models.DateTimeField()
    dropped_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-dropped_at"]
        indexes = [models.Index(fields=["product", "reason"], name="drop_product_reason_idx")]


class AcceptedMinute(models.Model):
    """How many requests under one ingestion key were accepted in one minute, counted as a
    drain applies them (the doors write nothing more per request). A drain appends its own rows
    rather than adding to a shared one, so concurrent drains never wait on each other's locks;
    reads sum them. Kept INGESTION_DROP_RETENTION_DAYS, like the drop log."""

    key_digest = models.CharField(max_length=64)
    minute = models.DateTimeField()
    requests = models.PositiveIntegerField()
    # The latest time one of these requests was accepted: the key's "last request seen".
    last_received_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["key_digest", "minute"], name="accepted_minute_key_idx")]


class AnonymousDay(models.Model):
    """How many messages named only by an anonymousId (no userId) came under one key in one day:
    accepted, not applied, and counted rather than logged a row each (a site's every page view
    before identify() would flood the drop log). A drain appends its own rows; reads sum them.
    Kept INGESTION_DROP_RETENTION_DAYS, like the drop log."""

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="+")
    key_fingerprint = models.CharField(max_length=8)
    day = models.DateField()
    messages = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["product", "day"], name="anonymous_day_product_idx")]


def seen_message_key(product_id: int, message_id: str) -> uuid.UUID:
    """SeenMessage's key: what PostgreSQL computes as md5(product_id || ':' || message_id)."""
    digest = hashlib.md5(f"{product_id}:{message_id}".encode(), usedforsecurity=False)
    return uuid.UUID(digest.hexdigest())


class SeenMessage(models.Model):
    """A `messageId` already applied for a product, so a repeat (a retry after a timeout, the
    same message through another endpoint) is applied once. Written in the same transaction as
    the effect; purged after INGESTION_DEDUP_DAYS."""

    # Every applied message writes one row, so the row is kept lean. Its key is the MD5 of
    # "<product id>:<messageId>" as a UUID (`seen_message_key`): 16 bytes that are both the
    # primary key and the per-product dedup key, so each message checks and fills one small
    # index. No database foreign key (its deferred check ran once per row at commit; deleting a
    # product still cascades through the ORM), no index on product or on the messageId text
    # (kept for people, in the admin), and on PostgreSQL a BRIN index for the purge's `seen_at`
    # range, as rows arrive in time order (a B-tree elsewhere; migration 0003).
    message_key = models.UUIDField(primary_key=True, editable=False)
    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    message_id = models.CharField(max_length=255)
    seen_at = models.DateTimeField()
    # Who sent it, as keyed hashes (ingestion.services.dedup.seen_message_sender_hash) of the
    # message's userId and, for a group call, its groupId: an erasure finds its person's rows
    # by them, and the table holds no tracking id. 8 bytes each, and nothing for a null; no
    # index (an erasure scans the table once, rarely; every message would pay for an index).
    # Rows written before these columns have neither.
    user_hash = models.BigIntegerField(null=True, blank=True)
    account_hash = models.BigIntegerField(null=True, blank=True)

    def __str__(self) -> str:
        return self.message_id
