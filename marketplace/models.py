"""The marketplace connection of a product, its sync runs and license mirror."""

from django.db import models
from django_celery_beat.models import PeriodicTask
from encrypted_fields.fields import EncryptedTextField

from engagement.models import Product


class MarketplaceConnection(models.Model):
    """One product's link to one marketplace app. Plain settings beside an encrypted token.

    The API token is stored encrypted, never shown again and never logged. `developer_id` is
    looked up from the vendor ID; `marketplace_product_id` is the app's productId (a UUID).
    """

    class State(models.TextChoices):
        NOT_CONFIGURED = "not_configured", "Not configured"
        ACTIVE = "active", "Active"
        REQUIRES_AUTHENTICATION = "requires_authentication", "Requires authentication"
        DISCONNECTED = "disconnected", "Disconnected"

    product = models.OneToOneField(
        Product, on_delete=models.CASCADE, related_name="marketplace_connection"
    )
    email = models.EmailField("user name (email)", max_length=320, blank=True, default="")
    api_token = EncryptedTextField(null=True, blank=True)  # the library stores "" as NULL
    # The day the API token was set (Atlassian tokens expire within a year, and the expiry is
    # not readable through the API): the day it was saved unless given; None without a token.
    token_set_on = models.DateField("token set on", null=True, blank=True)
    vendor_id = models.CharField("vendor ID", max_length=32, blank=True, default="")
    developer_id = models.CharField("developer ID", max_length=64, blank=True, default="")
    marketplace_product_id = models.CharField(
        "marketplace product ID", max_length=64, blank=True, default=""
    )
    app_name = models.CharField(max_length=255, blank=True, default="")
    # The marketplace API the details were checked against (MARKETPLACE_API_URL of the process
    # that saved them): its syncs ask the same API, whatever the workers were started with.
    # Empty (connections saved before it existed): MARKETPLACE_API_URL.
    api_url = models.URLField("marketplace API URL", max_length=255, blank=True, default="")
    state = models.CharField(max_length=32, choices=State.choices, default=State.NOT_CONFIGURED)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    # Set when a full sync finished; cleared when details are saved, so the next sync is full.
    full_sync_completed_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)
    # A lease, not a transaction-long lock: whoever holds it until `sync_lease_until` runs the
    # sync; a crashed worker's lease simply expires.
    sync_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    sync_lease_owner = models.CharField(max_length=64, blank=True, default="", editable=False)
    periodic_task = models.OneToOneField(
        PeriodicTask, on_delete=models.SET_NULL, null=True, blank=True, editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.product.name}: {self.app_name or self.marketplace_product_id or '-'}"


class SyncRun(models.Model):
    """One sync of one connection: what was asked, how far it got, what it found."""

    class Trigger(models.TextChoices):
        CONNECTED = "connected", "Details saved (first sync)"
        SCHEDULED = "scheduled", "Schedule"
        MANUAL = "manual", "Sync now"

    class Mode(models.TextChoices):
        FULL = "full", "All licenses"
        UPDATED = "updated", "Licenses updated recently"

    class Outcome(models.TextChoices):
        RUNNING = "running", "Running"
        RETRYING = "retrying", "Waiting to retry"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        UNAUTHORIZED = "unauthorized", "Stopped: requires authentication"
        STOPPED = "stopped", "Stopped"

    class Stage(models.TextChoices):
        LICENSES = "licenses", "Licenses"
        TRANSACTIONS = "transactions", "Transactions"
        FEEDBACK = "feedback", "Uninstall feedback"
        TRAITS = "traits", "Account traits"

    OPEN = (Outcome.RUNNING, Outcome.RETRYING)
    FIRST_STAGE = Stage.TRANSACTIONS

    connection = models.ForeignKey(
        MarketplaceConnection, on_delete=models.CASCADE, related_name="runs"
    )
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    mode = models.CharField(max_length=16, choices=Mode.choices)
    last_updated_from = models.DateField(null=True, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.RUNNING)
    error = models.TextField(blank=True, default="")
    pages = models.PositiveIntegerField(default=0)
    licenses_seen = models.PositiveIntegerField(default=0)
    accounts_matched = models.PositiveIntegerField(default=0)
    accounts_created = models.PositiveIntegerField(default=0)
    skipped_without_cloud_id = models.PositiveIntegerField(default=0)
    # Where the run is: transactions, feedback, licenses, then the accounts' traits; with
    # `next_url`, where a retry continues. A run starts at FIRST_STAGE (services); the default
    # (also in the database, for the previous release's processes during an upgrade) is for
    # runs made by code that reads licenses only.
    stage = models.CharField(
        max_length=16, choices=Stage.choices, default=Stage.LICENSES, db_default=Stage.LICENSES
    )
    transactions_seen = models.PositiveIntegerField(default=0, db_default=0)
    # Sales without cloudId (server, data center) or of another app: they belong to no account.
    transactions_skipped = models.PositiveIntegerField(default=0, db_default=0)
    feedback_seen = models.PositiveIntegerField(default=0, db_default=0)
    # Accounts whose `am.` traits this run changed (an unchanged account is not written).
    # The new counters have database defaults too: the previous release's inserts omit them.
    accounts_updated = models.PositiveIntegerField(default=0, db_default=0)
    # Licenses the mapping refused (a value breaking its field's rule), and the first reasons:
    # [{"license": "appEntitlementId ...", "field": "company", "reason": "..."}, ...].
    skipped_invalid = models.PositiveIntegerField(default=0)
    skipped_reasons = models.JSONField(default=list, blank=True)
    # What else this run is: e.g. "Continues run 12 from where it stopped."
    note = models.CharField(max_length=255, blank=True, default="")
    # Where the run continues: the next page's URL (absolute, as built by the client).
    next_url = models.TextField(blank=True, default="")
    # Consecutive failed attempts at the current page (reset by progress), and all of the run's.
    attempts = models.PositiveSmallIntegerField(default=0)
    retries = models.PositiveSmallIntegerField(default=0)
    # When the run is due: queued or waiting to retry, the time its task should start; while a
    # worker holds it, the end of that worker's lease.
    retry_at = models.DateTimeField(null=True, blank=True)
    # Set by the worker on every page; None until a worker first picks the run up.
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["connection", "-started_at"], name="syncrun_recent_idx")]

    def __str__(self) -> str:
        return f"{self.get_trigger_display()} run {self.started_at:%Y-%m-%d %H:%M} ({self.outcome})"


class License(models.Model):
    """The mapped traits of every license seen, per cloudId, to pick the winner among them.

    Kept so that the choice among several licenses of one cloudId (active first, then the latest
    maintenance end) holds across pages and across runs, whatever order licenses arrive in.
    Holds only the `am.` trait values, never contact fields.
    """

    connection = models.ForeignKey(
        MarketplaceConnection, on_delete=models.CASCADE, related_name="licenses"
    )
    cloud_id = models.CharField(max_length=255)
    ref = models.CharField(max_length=320)
    active = models.BooleanField()
    maintenance_end = models.CharField(max_length=10, blank=True, default="")
    last_updated = models.CharField(max_length=10, blank=True, default="")
    traits = models.JSONField(default=dict)
    last_run = models.ForeignKey(SyncRun, on_delete=models.SET_NULL, null=True, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["connection", "ref"], name="license_unique_ref")
        ]
        indexes = [models.Index(fields=["connection", "cloud_id"], name="license_cloud_idx")]


class Transaction(models.Model):
    """One sales transaction line of the connected app, reduced to what the revenue traits need.

    Identified by (transactionId, transactionLineItemId); a refund is a line of its own with a
    negative amount. Only cloud sales are kept (they name the account by cloudId); no customer,
    billing or partner detail is stored.
    """

    connection = models.ForeignKey(
        MarketplaceConnection, on_delete=models.CASCADE, related_name="transactions"
    )
    transaction_id = models.CharField(max_length=255)
    line_item_id = models.CharField(max_length=255)
    cloud_id = models.CharField(max_length=255)
    # appEntitlementId (else appEntitlementNumber): which license of the account it paid for.
    entitlement = models.CharField(max_length=255, blank=True, default="")
    sale_date = models.DateField()
    sale_type = models.CharField(max_length=16)  # new, renewal, upgrade, downgrade, refund
    billing_period = models.CharField(max_length=8, blank=True, default="")  # monthly, annual
    license_type = models.CharField(max_length=32, blank=True, default="")
    vendor_amount = models.DecimalField(max_digits=19, decimal_places=4)  # USD
    maintenance_start = models.DateField(null=True, blank=True)
    maintenance_end = models.DateField(null=True, blank=True)
    last_updated = models.DateField(null=True, blank=True)
    last_run = models.ForeignKey(SyncRun, on_delete=models.SET_NULL, null=True, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["connection", "transaction_id", "line_item_id"],
                name="transaction_unique_line",
            )
        ]
        indexes = [models.Index(fields=["connection", "cloud_id"], name="transaction_cloud_idx")]


class Uninstall(models.Model):
    """One uninstall feedback of the connected app: its day and reasonKey, nothing personal (no
    submitter, no message). Identified by a hash of the fields that tell two feedbacks apart."""

    connection = models.ForeignKey(
        MarketplaceConnection, on_delete=models.CASCADE, related_name="uninstalls"
    )
    key = models.CharField(max_length=64)
    cloud_id = models.CharField(max_length=255, blank=True, default="")
    entitlement = models.CharField(max_length=255, blank=True, default="")
    feedback_date = models.DateField()
    reason_key = models.CharField(max_length=255, blank=True, default="")
    last_run = models.ForeignKey(SyncRun, on_delete=models.SET_NULL, null=True, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["connection", "key"], name="uninstall_unique_key")
        ]
        indexes = [models.Index(fields=["connection", "cloud_id"], name="uninstall_cloud_idx")]
