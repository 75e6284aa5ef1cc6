"""Automations (a trigger, conditions and a destination), who is in each one's condition, and the
deliveries they made with every attempt."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from encrypted_fields.fields import EncryptedTextField

from engagement.models import Segment, Workspace


class Automation(models.Model):
    """Tells a webhook or a Slack channel when a workspace's account or user enters a condition."""

    class Trigger(models.TextChoices):
        SCORE_CHANGED = "score_changed", "Score changed by N or more"
        BAND_ENTERED = "band_entered", "Entered a score band"
        SEGMENT_ENTERED = "segment_entered", "Entered a segment"
        SEGMENT_LEFT = "segment_left", "Left a segment"
        NEW_ACCOUNT = "new_account", "New account"
        NEW_USER = "new_user", "New user"
        INACTIVE = "inactive", "No event for N days"

    class Target(models.TextChoices):
        ACCOUNTS = "accounts", "Accounts"
        USERS = "users", "Users"

    class Destination(models.TextChoices):
        WEBHOOK = "webhook", "Webhook (Standard Webhooks signed)"
        SLACK = "slack", "Slack incoming webhook"

    class Match(models.TextChoices):
        ALL = "all", "All conditions"
        ANY = "any", "Any condition"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="automations")
    name = models.CharField(max_length=200)
    trigger = models.CharField(max_length=32, choices=Trigger.choices)
    target = models.CharField(max_length=16, choices=Target.choices, default=Target.ACCOUNTS)
    # score_changed: points (up or down); band_entered: the band's floor (75, 50, 25, 0), or
    # None for any band.
    threshold = models.PositiveSmallIntegerField(null=True, blank=True)
    segment = models.ForeignKey(
        Segment, on_delete=models.CASCADE, null=True, blank=True, related_name="automations"
    )
    days = models.PositiveSmallIntegerField(null=True, blank=True)  # inactive: days without events
    # The segment condition language (engagement.segment_matching), matched all or any.
    conditions = models.JSONField(default=list, blank=True)
    match = models.CharField(max_length=3, choices=Match.choices, default=Match.ALL)
    destination = models.CharField(
        max_length=16, choices=Destination.choices, default=Destination.WEBHOOK
    )
    # A Slack incoming-webhook URL is itself a credential: every URL is stored encrypted.
    url = EncryptedTextField()
    # The library stores "" as NULL.
    secret = EncryptedTextField(null=True, blank=True)  # whsec_..., webhooks only
    # During a rotation the previous secret signs too, until previous_secret_until.
    previous_secret = EncryptedTextField(null=True, blank=True)
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    cooldown_seconds = models.PositiveIntegerField(default=24 * 3600)
    disabled_reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["workspace", "enabled"], name="automation_ws_enabled_idx")]

    def __str__(self) -> str:
        return self.name

    @property
    def subject_kind(self) -> str:
        return "user" if self.target == self.Target.USERS else "account"


class AutomationSubjectState(models.Model):
    """A subject currently in an automation's condition (its band for band_entered), and when it
    last fired. Entering is a new row (or a new band); a subject that leaves loses its row but
    keeps its cool-down through `fired_at` in AutomationFiring."""

    automation = models.ForeignKey(Automation, on_delete=models.CASCADE, related_name="states")
    subject_id = models.BigIntegerField()
    band = models.SmallIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["automation", "subject_id"], name="automation_state_unique"
            )
        ]


class AutomationFiring(models.Model):
    """When an automation last fired for a subject: the cool-down reads it."""

    automation = models.ForeignKey(Automation, on_delete=models.CASCADE, related_name="firings")
    subject_id = models.BigIntegerField()
    fired_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["automation", "subject_id"], name="automation_firing_unique"
            )
        ]


class Delivery(models.Model):
    """One message to an automation's destination; its id is the `webhook-id` of every attempt."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RETRYING = "retrying", "Retrying"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"
        # Pending or retrying when its automation was switched off: never attempted again
        # (automations.services.automation_switch_off).
        CANCELLED = "cancelled", "Cancelled"

    id = models.CharField(primary_key=True, max_length=40)
    automation = models.ForeignKey(Automation, on_delete=models.CASCADE, related_name="deliveries")
    event_type = models.CharField(max_length=64)
    payload = models.JSONField()
    subject_id = models.BigIntegerField(null=True, blank=True)  # None: a test event
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # An attempt in flight holds the delivery until then; past it, the sweep sends it again.
    lease_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="delivery_due_idx",
                condition=Q(status__in=["pending", "retrying"]),
            ),
            models.Index(fields=["automation", "-created_at"], name="delivery_recent_idx"),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def shown_status(self) -> str:
        """delivered, retrying (pending included), failed or cancelled."""
        return "retrying" if self.status == self.Status.PENDING else self.status


class DeliveryAttempt(models.Model):
    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_rows")
    attempted_at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    response_excerpt = models.TextField(blank=True, default="")  # the first 1 KB
    error = models.TextField(blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["delivery", "attempted_at"], name="attempt_delivery_idx")]


class TraitSync(models.Model):
    """Pushes a workspace's scores, changes and segments as traits to a Segment-compatible
    HTTP API (Segment, RudderStack's data plane, or anything that speaks /v1/batch)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="trait_syncs")
    host = models.URLField(max_length=500)  # e.g. https://api.segment.io
    write_key = EncryptedTextField()
    interval_minutes = models.PositiveIntegerField(default=60)
    prefix = models.CharField(max_length=32, default="eds_")
    enabled = models.BooleanField(default=True)
    # Subjects whose score rows or segments changed after this were not sent yet.
    synced_through = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "score sync"  # as the dashboard and the docs name it

    def __str__(self) -> str:
        return f"{self.workspace} -> {self.host}"


class TraitSyncRun(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        OK = "ok", "Sent"
        FAILED = "failed", "Failed"

    sync = models.ForeignKey(TraitSync, on_delete=models.CASCADE, related_name="runs")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    users_sent = models.PositiveIntegerField(default=0)
    accounts_sent = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")

    class Meta:
        verbose_name = "score sync run"
        indexes = [models.Index(fields=["sync", "-started_at"], name="trait_sync_run_recent_idx")]
