"""What users did: event names, raw events, daily rollups, per-day tallies and applied batches."""

from django.db import models
from django.db.models import Q

from engagement.models.people import Account, User
from engagement.models.products import Product


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


class Event(models.Model):
    """One tracked event: who, for which account, what and when. No properties, ever.

    The busiest table: append-only, written with COPY, and on PostgreSQL partitioned by day on
    `timestamp` (migration 0003) so retention drops whole partitions (EVENTS_RETENTION_DAYS).
    Its references are kept by the code that writes them, not by the database: foreign-key
    checks and their indexes cost more per event than everything else together. On PostgreSQL
    the table has no key nor any index (migration 0023): nothing reads an event by id, and the
    (id, timestamp) key's entry per event was about two fifths of storing it. `id` is still
    Django's primary key and every event gets one; deletes cascade through the ORM, by user or
    product.
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
    # No index at all: nothing in the service reads raw events by time (scores come from
    # rollups), retention drops whole daily partitions, and a (product, timestamp) index cost
    # the drain about 2 µs per event, half of storing the event.
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
            # A day's rows in the order the hourly job stores an ended day (by account, then
            # user): it finds each chunk it moves by this index. No column here changes when a
            # count is added, so those updates stay HOT.
            models.Index(
                fields=["product", "day", "account_key", "user"], name="rollup_day_account_idx"
            ),
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
