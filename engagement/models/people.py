"""Who a product tracks: users, accounts, their traits and the links between them."""

from django.db import models
from django.db.models import Q

from engagement.models.products import Product
from engagement.presentation import (
    MRR_TRAIT,
    NAME_KEY_LENGTH,
    account_name_key,
    user_name_key,
)


class TraitsMixin(models.Model):
    """Traits merged per key: `trait_times` keeps the message time (ms) that set each key."""

    traits = models.JSONField(default=dict, blank=True)
    trait_times = models.JSONField(default=dict, blank=True, editable=False)

    class Meta:
        abstract = True


# The product needs no index of its own on users and accounts: the unique (product, tracking_id)
# key leads with it, and every index less is one write less per row the workers store.
# `name_key` is the natural sort key of the name a page shows (engagement.presentation): written
# with the traits wherever they are written (engagement/people_rows.py, save() here), indexed
# after the product so that the lists sorted by name page through an index, not a sort.


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
    name_key = models.CharField(
        max_length=NAME_KEY_LENGTH, blank=True, default="", db_default="", editable=False
    )

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
            models.Index(fields=["product", "name_key", "id"], name="user_name_key_idx"),
        ]

    def __str__(self) -> str:
        return self.tracking_id

    def save(self, *args, **kwargs) -> None:
        self.name_key = user_name_key(
            self.traits if isinstance(self.traits, dict) else {}, self.email, self.tracking_id
        )
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], "name_key"}
        super().save(*args, **kwargs)


class Account(TraitsMixin):
    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, related_name="accounts", db_index=False
    )
    tracking_id = models.CharField(max_length=255)
    # False for an account known only from a link, an event's context or a license.
    identified = models.BooleanField(default=False)
    # The account above this one (a group call's `parent_group_id` trait, engagement/hierarchy).
    parent = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="children"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    name_key = models.CharField(
        max_length=NAME_KEY_LENGTH, blank=True, default="", db_default="", editable=False
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["product", "tracking_id"], name="account_unique_tracking_id"
            )
        ]
        indexes = [
            models.Index(fields=["product", "updated_at"], name="account_product_updated_idx"),
            models.Index(fields=["product", "name_key", "id"], name="account_name_key_idx"),
            # The accounts with an MRR: the overview's money figures read only these, not every
            # account's traits (docs/marketplace.md).
            models.Index(
                fields=["product"],
                condition=Q(traits__has_key=MRR_TRAIT),
                name="account_with_mrr_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.tracking_id

    def save(self, *args, **kwargs) -> None:
        self.name_key = account_name_key(
            self.traits if isinstance(self.traits, dict) else {}, self.tracking_id
        )
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], "name_key"}
        super().save(*args, **kwargs)


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


class UserAlias(models.Model):
    """A tracking id that an alias call merged into a user: messages naming it apply to that
    user. Deleted with the user, so an erasure takes its aliases along."""

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="+", db_index=False)
    previous_id = models.CharField(max_length=255)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="aliases")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["product", "previous_id"], name="user_alias_unique_previous_id"
            )
        ]

    def __str__(self) -> str:
        return f"{self.previous_id} → user {self.user_id}"
