"""Segments of a workspace: their conditions, current members and membership changes."""

from django.db import models
from django.db.models import Q

from engagement.models.people import Account, User
from engagement.models.products import Workspace


class Segment(models.Model):
    """Accounts or users of one workspace that meet every condition.

    conditions: [{"field": "trait:plan" | "trait:am.status" | "metric:engagement_score",
                  "operator": "equals" | "not_equals" | "contains" | "greater_than" | "less_than"
                              | "is_set" | "is_not_set" | "within_last_days",
                  "value": ...}]
    """

    class Target(models.TextChoices):
        ACCOUNTS = "accounts", "Accounts"
        USERS = "users", "Users"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="segments")
    name = models.CharField(max_length=200)
    target = models.CharField(max_length=16, choices=Target.choices, default=Target.ACCOUNTS)
    conditions = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name


class SegmentMember(models.Model):
    """A current member and when it joined; exactly one of account and user is set."""

    segment = models.ForeignKey(Segment, on_delete=models.CASCADE, related_name="members")
    account = models.ForeignKey(Account, on_delete=models.CASCADE, null=True, blank=True)
    user = models.ForeignKey(User, on_delete=models.CASCADE, null=True, blank=True)
    joined_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["segment", "account"], name="segment_account_unique"),
            models.UniqueConstraint(fields=["segment", "user"], name="segment_user_unique"),
            models.CheckConstraint(
                condition=Q(account__isnull=False, user__isnull=True)
                | Q(account__isnull=True, user__isnull=False),
                name="segment_member_one_target",
            ),
        ]
        indexes = [
            # The segment page lists members most recent first: a page reads 50 entries, not
            # every member (and every account and user they join to).
            models.Index(fields=["segment", "-joined_at", "id"], name="segment_member_recent_idx"),
        ]


class SegmentMembershipChange(models.Model):
    """One account or user joining or leaving a segment, as the segment refresh saw it; kept
    SEGMENT_CHANGES_RETENTION_DAYS. Exactly one of account and user is set."""

    class Change(models.TextChoices):
        JOINED = "joined", "Joined"
        LEFT = "left", "Left"

    segment = models.ForeignKey(Segment, on_delete=models.CASCADE, related_name="changes")
    account = models.ForeignKey(
        Account, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    user = models.ForeignKey(
        User, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    change = models.CharField(max_length=8, choices=Change.choices)
    at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["segment", "at"], name="segment_change_at_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(account__isnull=False, user__isnull=True)
                | Q(account__isnull=True, user__isnull=False),
                name="segment_change_one_target",
            ),
        ]
