"""Read API tokens: `eds_` + random characters, stored only as a hash."""

import hashlib
import secrets

from django.db import models

from engagement.models import Product

TOKEN_PREFIX = "eds_"  # noqa: S105 (a public prefix, not a secret)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class ApiToken(models.Model):
    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    # The first characters, so an admin can tell tokens apart; the rest is never stored.
    prefix = models.CharField(max_length=16, editable=False)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
