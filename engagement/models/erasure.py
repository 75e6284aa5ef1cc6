"""Erasure requests and the suppressions that keep an erased tracking id out."""

from django.db import models

from engagement.models.products import Product


class Erasure(models.Model):
    """A request to erase one user or account, and what its erasure removed.

    Holds no personal data: the target is its row id (which points at nothing once erased),
    never its tracking id or email. Who asked is a read API token's id or an admin user's id.
    """

    class Kind(models.TextChoices):
        USER = "user", "User"
        ACCOUNT = "account", "Account"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"

    class Via(models.TextChoices):
        API = "api", "Read API"
        ADMIN = "admin", "Admin"
        COMMAND = "command", "Management command"

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="erasures")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    target_id = models.BigIntegerField()
    suppress = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    via = models.CharField(max_length=16, choices=Via.choices)
    # A read API token's id, or an admin user's id: plain ids, kept after either is deleted.
    requested_by_token_id = models.BigIntegerField(null=True, blank=True)
    requested_by_admin_id = models.BigIntegerField(null=True, blank=True)
    requested_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    # What was removed, by kind of row: {"events": 100000, "rollups": 30, ...}
    counts = models.JSONField(default=dict, blank=True)
    # A failure's exception class, never its message (which could quote a value).
    error = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["-requested_at"]
        indexes = [models.Index(fields=["status"], name="erasure_status_idx")]

    def __str__(self) -> str:
        return f"erasure {self.id} of a {self.kind} ({self.status})"


class Suppression(models.Model):
    """Data for an erased tracking id that the ingestion worker drops on arrival.

    Only a keyed hash of the tracking id is kept (engagement.erasure.tracking_id_hash): enough to
    recognise it in later messages, not to read it back.
    """

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="suppressions")
    kind = models.CharField(max_length=16, choices=Erasure.Kind.choices)
    tracking_hash = models.CharField(max_length=64)
    erasure = models.ForeignKey(
        Erasure, on_delete=models.SET_NULL, null=True, blank=True, related_name="suppressions"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # Leads with the product: the worker's one lookup per product and batch.
            models.UniqueConstraint(
                fields=["product", "kind", "tracking_hash"], name="suppression_unique"
            )
        ]

    def __str__(self) -> str:
        return f"suppressed {self.kind} {self.tracking_hash[:8]}…"
