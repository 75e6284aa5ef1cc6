"""Bearer authentication with read API tokens: `Authorization: Bearer eds_...`."""

from dataclasses import dataclass
from datetime import timedelta

from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from readapi.models import TOKEN_PREFIX, ApiToken, hash_token

# Record a token's last use at most this often, so reads do not turn into one write each.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class TokenPrincipal:
    """Who is calling: a token of one product (request.user)."""

    token_id: int
    product_id: int
    is_authenticated: bool = True


class InvalidToken(exceptions.AuthenticationFailed):
    default_code = "invalid_token"
    default_detail = "The API token is not valid or has been revoked."


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[TokenPrincipal, ApiToken] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, credentials = header.strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        plain = credentials.strip()
        if not plain.startswith(TOKEN_PREFIX) or " " in plain:
            raise InvalidToken()
        # Always the primary, never a lagging replica: a revoked token stops working at once.
        token = (
            ApiToken.objects.using(DEFAULT_DB_ALIAS)
            .filter(token_hash=hash_token(plain), revoked_at__isnull=True)
            .only("id", "product_id", "last_used_at")
            .first()
        )
        if token is None:
            raise InvalidToken()
        _touch(token)
        return TokenPrincipal(token_id=token.id, product_id=token.product_id), token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


def _touch(token: ApiToken) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(id=token.id).update(last_used_at=now)
        token.last_used_at = now


class HasApiToken(permissions.BasePermission):
    """Only requests that authenticated with a token get through (401 otherwise)."""

    def has_permission(self, request: Request, view) -> bool:
        return isinstance(request.user, TokenPrincipal)
