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


class Scope(models.TextChoices):
    """What a token may do: every token reads; `delete` also erases users and accounts."""

    READ = "read", "Read"
    DELETE = "delete", "Delete (erase users and accounts)"


def scopes_parse(text: str) -> list[str]:
    """`read,delete` as a sorted list of known scopes, `read` always among them; ValueError
    names an unknown one."""
    scopes = {part.strip() for part in text.split(",") if part.strip()} | {Scope.READ}
    unknown = scopes - set(Scope.values)
    if unknown:
        raise ValueError(f"Unknown scope(s): {', '.join(sorted(unknown))}.")
    return sorted(scopes, key=Scope.values.index)


class ApiToken(models.Model):
    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    # The first characters, so an admin can tell tokens apart; the rest is never stored.
    prefix = models.CharField(max_length=16, editable=False)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # A list of Scope values; tokens issued before scopes existed read only.
    scopes = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"
        verbose_name_plural = "API tokens"

    def allows(self, scope: str) -> bool:
        return scope == Scope.READ or scope in self.scopes

    @property
    def effective_scopes(self) -> list[str]:
        """What the token may do, in Scope order: `read` always, then what it was given."""
        return [scope for scope in Scope.values if self.allows(scope)]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
