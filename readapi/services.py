"""Read API writes: issuing and revoking tokens."""

from django.utils import timezone

from readapi.models import ApiToken, Scope, generate_token, hash_token


def api_token_create(
    *, product_id: int, name: str, scopes: list[str] | None = None
) -> tuple[ApiToken, str]:
    """Issue a token (read only unless `scopes` says more); the plain text is returned once and
    never stored."""
    plain = generate_token()
    token = ApiToken.objects.create(
        product_id=product_id,
        name=name,
        prefix=plain[:10],
        token_hash=hash_token(plain),
        scopes=sorted(set(scopes or []) | {Scope.READ}, key=Scope.values.index),
    )
    return token, plain


def api_token_revoke(*, token_id: int) -> ApiToken:
    token = ApiToken.objects.get(id=token_id)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token
