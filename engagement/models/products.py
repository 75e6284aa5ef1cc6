"""Tenants and their scoring profiles: products, workspaces, event weights, dashboard members."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q


class Product(models.Model):
    """A tenant: keys, tokens, users, accounts, events, at most one marketplace connection."""

    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # The last past day whose rollups were stored again by account and user (event_store.
    # rollups_order_past_days); None before the first.
    rollups_ordered_through = models.DateField(null=True, blank=True, editable=False)

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

    def __str__(self) -> str:
        return f"{self.event_name}: {self.weight}"


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
