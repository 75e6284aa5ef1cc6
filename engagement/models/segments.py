"""Segments of a workspace: their conditions, current members and membership changes."""

from django.db import models
from django.db.models import Q

from engagement.models.people import Account, User
from engagement.models.products import Workspace


class Segment(models.Model):
    """Accounts or users of one workspace that meet every condition (`match` "all") or at
    least one (`match` "any"); the condition language is engagement/segments.py's.

    conditions: [{"field": "trait:plan" | "metric:engagement_score" | "event:<name>",
                  "operator": "equals" | "not_equals" | "contains" | "greater_than" | "less_than"
                              | "is_set" | "is_not_set" | "within_last_days"
                              | "more_than_days_ago" | "within_next_days" | "count_at_least",
                  "value": ..., "within_last_days": D (event conditions only)}
                 | {"any": [conditions]} (a group: one of them holds)]
    `builtin` marks the segments every workspace starts with (engagement/builtin_segments.py);
    they are edited and deleted like any other and listed first.
    """

    class Match(models.TextChoices):
        ALL = "all", "All conditions"
        ANY = "any", "Any condition"

    class Target(models.TextChoices):
        ACCOUNTS = "accounts", "Accounts"
        USERS = "users", "Users"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="segments")
    name = models.CharField(max_length=200)
    target = models.CharField(max_length=16, choices=Target.choices, default=Target.ACCOUNTS)
    conditions = models.JSONField(default=list, blank=True)
    match = models.CharField(max_length=3, choices=Match.choices, default=Match.ALL)
    builtin = models.BooleanField(default=False, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # When the members were last compared with the conditions: a segment compared since its
    # last change, earlier the same UTC day, can be refreshed for the subjects that changed only.
    members_refreshed_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Why the last refresh could not evaluate the conditions (a day count beyond any date, a
    # number the database cannot compare: stored past the checks, or by an older release), blank
    # when it could; since when, null when fine. A broken segment keeps the members of its last
    # good refresh and is skipped; the next refresh that evaluates it clears both.
    broken_reason = models.TextField(blank=True, default="", db_default="", editable=False)
    broken_at = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return self.name


# Members and changes are derived rows that only the segment refresh writes, from ids it has just
# read off the score tables; deleting a segment, account or user still cascades (the ORM does it:
# engagement/dependents.py for erasures and merges). Without database-level foreign keys a refresh
# skips two deferred checks per row written at commit, each locking the referenced account row:
# a workspace's first refresh writes 460,000 members and as many changes for 100,000 accounts,
# and took 35-40 s with them against 14 s without (docs/benchmarks.md). The segment needs no
# index of its own: the unique keys and the recent-members and change-log indexes lead with it.
# A row names an account or a user, never both, so each index on one of them covers only the
# rows that name it: no entry for the other's NULL in every row.


class SegmentMember(models.Model):
    """A current member and when it joined; exactly one of account and user is set."""

    segment = models.ForeignKey(
        Segment,
        on_delete=models.CASCADE,
        related_name="members",
        db_constraint=False,
        db_index=False,
    )
    account = models.ForeignKey(
        Account,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        db_constraint=False,
        db_index=False,
    )
    user = models.ForeignKey(
        User, on_delete=models.CASCADE, null=True, blank=True, db_constraint=False, db_index=False
    )
    joined_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["segment", "account"],
                condition=Q(account__isnull=False),
                name="segment_account_unique",
            ),
            models.UniqueConstraint(
                fields=["segment", "user"],
                condition=Q(user__isnull=False),
                name="segment_user_unique",
            ),
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
            # An erasure or a merge deletes a person's memberships; a profile lists them.
            models.Index(
                fields=["account"],
                condition=Q(account__isnull=False),
                name="segment_member_account",
            ),
            models.Index(
                fields=["user"], condition=Q(user__isnull=False), name="segment_member_user"
            ),
        ]


class SegmentMembershipChange(models.Model):
    """One account or user joining or leaving a segment, as the segment refresh saw it; kept
    SEGMENT_CHANGES_RETENTION_DAYS. Exactly one of account and user is set."""

    class Change(models.TextChoices):
        JOINED = "joined", "Joined"
        LEFT = "left", "Left"

    segment = models.ForeignKey(
        Segment,
        on_delete=models.CASCADE,
        related_name="changes",
        db_constraint=False,
        db_index=False,
    )
    account = models.ForeignKey(
        Account,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    user = models.ForeignKey(
        User,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    change = models.CharField(max_length=8, choices=Change.choices)
    at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["segment", "at"], name="segment_change_at_idx"),
            # An erasure or a merge deletes a person's changes.
            models.Index(
                fields=["account"],
                condition=Q(account__isnull=False),
                name="segment_change_account",
            ),
            models.Index(
                fields=["user"], condition=Q(user__isnull=False), name="segment_change_user"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(account__isnull=False, user__isnull=True)
                | Q(account__isnull=True, user__isnull=False),
                name="segment_change_one_target",
            ),
        ]
