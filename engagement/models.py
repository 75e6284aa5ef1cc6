"""The domain: products, workspaces, users, accounts, their links, events and daily rollups."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from engagement.fields import BreakdownField


class Product(models.Model):
    """A tenant: keys, tokens, users, accounts, events, at most one marketplace connection."""

    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Workspace(models.Model):
    """A scoring profile over one product's data."""

    class Lookback(models.IntegerChoices):
        ONE_DAY = 1, "1 day"
        SEVEN_DAYS = 7, "7 days"
        THIRTY_DAYS = 30, "30 days"

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="workspaces")
    name = models.CharField(max_length=200)
    lookback_days = models.PositiveSmallIntegerField(
        choices=Lookback.choices, default=Lookback.THIRTY_DAYS
    )
    # At most this many of one event per user per day count (None: no cap), so a loop or a bot
    # cannot dominate a score.
    daily_event_cap = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)]
    )
    # Only accounts whose traits match score here: {"trait": value, ...}, all must hold ({}: all).
    account_filter = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.product.name} / {self.name}"


class EventWeight(models.Model):
    """How much one event name counts in a workspace: 1-10, 0 excludes it; unlisted names: 1."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="weights")
    event_name = models.CharField(max_length=255)
    weight = models.PositiveSmallIntegerField(default=1, validators=[MaxValueValidator(10)])

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "event_name"], name="weight_unique"),
            models.CheckConstraint(condition=Q(weight__lte=10), name="weight_at_most_10"),
        ]


class EventName(models.Model):
    """An event name a product has sent: what the admin offers for weighting."""

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="event_names")
    name = models.CharField(max_length=255)
    first_seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["product", "name"], name="event_name_unique")
        ]

    def __str__(self) -> str:
        return self.name


class ScoringState(models.Model):
    """Where a workspace's scores stand: the engine's watermark and the normalisation inputs.

    Kept apart from Workspace so that a long rescore, which locks this row, never blocks an admin
    saving the workspace.
    """

    workspace = models.OneToOneField(
        Workspace, on_delete=models.CASCADE, primary_key=True, related_name="scoring_state"
    )
    # Rollups, users, accounts and links changed after this instant are not yet reflected.
    scored_through = models.DateTimeField(null=True, blank=True)
    # The last day of the window the scores were computed for; a new day means a full rescore.
    window_end = models.DateField(null=True, blank=True)
    # Digest of lookback, cap, filter and weights at the last full rescore.
    config_digest = models.CharField(max_length=64, blank=True, default="")
    # 90th percentile of the workspace's non-zero raw scores, now and one period earlier.
    p90 = models.FloatField(default=0)
    previous_p90 = models.FloatField(default=0)
    refreshed_at = models.DateTimeField(null=True, blank=True)
    full_rescored_at = models.DateTimeField(null=True, blank=True)
    last_refresh_ms = models.PositiveIntegerField(default=0)
    last_full_rescore_ms = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"scoring state of workspace {self.workspace_id}"


class TraitsMixin(models.Model):
    """Traits merged per key: `trait_times` keeps the message time (ms) that set each key."""

    traits = models.JSONField(default=dict, blank=True)
    trait_times = models.JSONField(default=dict, blank=True, editable=False)

    class Meta:
        abstract = True


# The product needs no index of its own on users and accounts: the unique (product, tracking_id)
# key leads with it, and every index less is one write less per row the workers store.


class User(TraitsMixin):
    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, related_name="users", db_index=False
    )
    tracking_id = models.CharField(max_length=255)
    # False for a user known only from events: a track arrived before any identify.
    identified = models.BooleanField(default=False)
    email = models.CharField(max_length=320, blank=True, default="")
    first_seen_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["product", "tracking_id"], name="user_unique_tracking_id"
            )
        ]
        indexes = [
            models.Index(fields=["product", "email"], name="user_email_idx"),
            # Scoring finds users whose traits or links changed since its watermark.
            models.Index(fields=["product", "updated_at"], name="user_product_updated_idx"),
        ]

    def __str__(self) -> str:
        return self.tracking_id


class Account(TraitsMixin):
    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, related_name="accounts", db_index=False
    )
    tracking_id = models.CharField(max_length=255)
    # False for an account known only from a link, an event's context or a license.
    identified = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["product", "tracking_id"], name="account_unique_tracking_id"
            )
        ]
        indexes = [
            models.Index(fields=["product", "updated_at"], name="account_product_updated_idx")
        ]

    def __str__(self) -> str:
        return self.tracking_id


class Membership(models.Model):
    """A user's link to an account; `linked_at` is the latest message time that linked them."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="memberships")
    linked_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "account"], name="membership_unique")
        ]
        indexes = [
            models.Index(fields=["user", "-linked_at"], name="membership_recent_idx"),
            models.Index(fields=["created_at"], name="membership_created_idx"),
        ]


class Event(models.Model):
    """One tracked event: who, for which account, what and when. No properties, ever.

    The busiest table: append-only, written with COPY, and on PostgreSQL partitioned by day on
    `timestamp` (migration 0003) so retention drops whole partitions (EVENTS_RETENTION_DAYS).
    Its references are kept by the code that writes them, not by the database: foreign-key
    checks and their indexes cost more per event than everything else together, and a
    partitioned table's primary key is (id, timestamp). Deletes still cascade through the ORM.
    """

    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    user = models.ForeignKey(
        User, on_delete=models.CASCADE, related_name="events", db_constraint=False, db_index=False
    )
    account = models.ForeignKey(
        Account,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="events",
        db_constraint=False,
        db_index=False,
    )
    name = models.CharField(max_length=255)
    # No index beyond the primary key: nothing in the service reads raw events by time (scores
    # come from rollups), retention drops whole daily partitions, and a (product, timestamp)
    # index cost the drain about 2 µs per event, half of storing the event.
    timestamp = models.DateTimeField()


class EventRollup(models.Model):
    """Daily count per (user, account, event name, day): what scoring reads.

    `account_key` is the account id, or 0 for events without an account, so the unique key has no
    NULL in it and an upsert can add to the count on every database.
    """

    # No foreign-key constraints or single-column indexes: the apply path upserts these rows by
    # the tens of thousands, the composite indexes below cover every lookup, and the writer
    # resolves every id it stores. Deletes still cascade through the ORM.
    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    user = models.ForeignKey(
        User, on_delete=models.CASCADE, related_name="rollups", db_constraint=False, db_index=False
    )
    account = models.ForeignKey(
        Account,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="rollups",
        db_constraint=False,
        db_index=False,
    )
    account_key = models.BigIntegerField(default=0)
    event_name = models.CharField(max_length=255)
    day = models.DateField()
    count = models.PositiveIntegerField(default=0)
    last_at = models.DateTimeField()
    # When a worker last added to this row. Not indexed: with no indexed column changing, adding
    # to a row is a HOT update on PostgreSQL (the table leaves free space on each page for it)
    # and touches no index. Scoring finds what changed through EventActivity instead.
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            # In this order a product's rollups stream grouped by user, event and day, as
            # scoring aggregates them, with no sort in between and no other product's rows.
            models.UniqueConstraint(
                fields=["product", "user", "event_name", "day", "account_key"],
                name="rollup_unique_day",
            ),
            models.CheckConstraint(
                condition=Q(account_key=0, account__isnull=True)
                | Q(account_key=models.F("account_id")),
                name="rollup_account_key_matches",
            ),
        ]
        indexes = [
            models.Index(fields=["account", "day"], name="rollup_account_day_idx"),
        ]


class EventActivity(models.Model):
    """The users and accounts one applied batch of events touched, and when: what an incremental
    scoring refresh reads to find changed rollups. One row per batch, not per event or rollup
    row; kept SCORING_ACTIVITY_KEEP_MINUTES, and a refresh whose watermark is older than that
    rescores in full."""

    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    applied_at = models.DateTimeField(db_index=True)
    # JSON arrays of ids. Plain ids, not foreign keys: a hint to rescore, harmless once stale.
    user_ids = models.JSONField(default=list)
    account_ids = models.JSONField(default=list)

    def __str__(self) -> str:
        return f"{len(self.user_ids)} users at {self.applied_at:%Y-%m-%d %H:%M:%S}"


class ScoreFields(models.Model):
    """Precomputed metrics the read API serves; every input of the score is here."""

    engagement_score = models.PositiveSmallIntegerField(default=0)  # 0-100
    score_change = models.SmallIntegerField(default=0)  # now minus one lookback period earlier
    raw_score = models.FloatField(default=0)  # sum of weights of events in the window
    percentile_rank = models.FloatField(default=0)  # 0-100 within the workspace
    active_days = models.PositiveSmallIntegerField(default=0)
    events_in_window = models.PositiveIntegerField(default=0)
    # Share (0-1) of the workspace's weighted event names used in the window.
    adoption = models.FloatField(default=0)
    last_seen = models.DateTimeField(null=True, blank=True)
    # [{"event": name, "count": n, "weight": w, "points": count * weight}]
    score_breakdown = BreakdownField()
    computed_at = models.DateTimeField(auto_now=True)
    # The same computation over the window one lookback period earlier: score_change is
    # engagement_score - previous_score.
    previous_raw_score = models.FloatField(default=0)
    previous_score = models.PositiveSmallIntegerField(default=0)
    # Whole days since the createdAt trait (an ISO 8601 date), else since first seen; None: unknown.
    tenure_days = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        abstract = True


# Score rows are derived data that only the scoring engine writes, from ids it has just joined
# against their tables; deleting a user, account or workspace still cascades (the ORM does it).
# Without database-level foreign keys a full rescore skips two deferred checks per row at commit
# (about 15 s for a million users). Three indexes per table, each write to a million rows paying
# for every one of them: the primary key; the unique key, leading with the user (or account) so
# that it also serves cascading deletes; and the ranking, leading with the workspace, which also
# serves every workspace-wide query.


class UserScore(ScoreFields):
    workspace = models.ForeignKey(
        Workspace,
        on_delete=models.CASCADE,
        related_name="user_scores",
        db_constraint=False,
        db_index=False,
    )
    user = models.ForeignKey(
        User, on_delete=models.CASCADE, related_name="scores", db_constraint=False, db_index=False
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "workspace"], name="user_score_unique")
        ]
        indexes = [
            models.Index(
                fields=["workspace", "-engagement_score", "user"], name="user_score_rank_idx"
            )
        ]


class AccountScore(ScoreFields):
    workspace = models.ForeignKey(
        Workspace,
        on_delete=models.CASCADE,
        related_name="account_scores",
        db_constraint=False,
        db_index=False,
    )
    account = models.ForeignKey(
        Account,
        on_delete=models.CASCADE,
        related_name="scores",
        db_constraint=False,
        db_index=False,
    )
    active_users = models.PositiveIntegerField(default=0)
    total_users = models.PositiveIntegerField(default=0)
    active_user_share = models.FloatField(default=0)  # 0-1

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["account", "workspace"], name="account_score_unique")
        ]
        indexes = [
            models.Index(
                fields=["workspace", "-engagement_score", "account"],
                name="account_score_rank_idx",
            )
        ]


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
            models.Index(
                fields=["segment", "-joined_at", "id"], name="segment_member_recent_idx"
            ),
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


class EventDayTally(models.Model):
    """Events of a product on one day under one name: what the overview sums instead of every
    rollup of the window. Each stored batch appends its own rows (no counter shared between
    concurrent writers); a periodic compaction folds the rows of a key into one."""

    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    day = models.DateField()
    event_name = models.CharField(max_length=255)
    count = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["product", "day"], name="event_tally_product_day_idx")]


class ProductMembership(models.Model):
    """Who may see a product in the dashboard: a viewer reads, a manager also configures the
    product's connections (the marketplace). Superusers need none: they see every product."""

    class Role(models.TextChoices):
        VIEWER = "viewer", "Viewer"
        MANAGER = "manager", "Manager"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="product_memberships"
    )
    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "product"], name="product_membership_unique")
        ]
        verbose_name = "product member"

    def __str__(self) -> str:
        return f"{self.user} ({self.get_role_display()}) of {self.product}"


# Score history: one row per (user or account, workspace, past UTC day) whose score or raw score
# was not zero that day; a missing row reads as 0. Today's point is the live score row. Derived
# rows like the scores (no database foreign keys; deletes cascade through the ORM); the primary
# key leads with the user (or account) so that one's history is one index range and a cascading
# delete finds its rows, and a day's rows are inserted in that order, one pass over the index.


class UserScoreDay(models.Model):
    pk = models.CompositePrimaryKey("user_id", "workspace_id", "day")
    user = models.ForeignKey(
        User, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    day = models.DateField()
    engagement_score = models.PositiveSmallIntegerField()
    raw_score = models.FloatField()


class AccountScoreDay(models.Model):
    pk = models.CompositePrimaryKey("account_id", "workspace_id", "day")
    account = models.ForeignKey(
        Account, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    day = models.DateField()
    engagement_score = models.PositiveSmallIntegerField()
    raw_score = models.FloatField()


class ScoreHistoryState(models.Model):
    """How far a workspace's stored history goes, and under which settings it was computed."""

    workspace = models.OneToOneField(
        Workspace, on_delete=models.CASCADE, primary_key=True, related_name="score_history_state"
    )
    # Every past day from `built_from` to `built_through` is stored (None: never built).
    built_from = models.DateField(null=True, blank=True)
    built_through = models.DateField(null=True, blank=True)
    # Digest of lookback, cap, filter and weights the stored days were computed with.
    config_digest = models.CharField(max_length=64, blank=True, default="")
    # Rollups changed after this instant (less the scoring overlap) may be a backfill of past
    # days not yet reflected.
    checked_through = models.DateTimeField(null=True, blank=True)
    last_run_ms = models.PositiveIntegerField(default=0)
    last_days = models.PositiveIntegerField(default=0)  # days recomputed by the last run

    def __str__(self) -> str:
        return f"score history of workspace {self.workspace_id}"


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
