"""Read API reads that other parts of the service need (the demo credentials)."""

from readapi.models import ApiToken, hash_token


def active_api_token(*, product_id: int, plain: str) -> ApiToken | None:
    """The product's unrevoked token whose plain text is `plain`, if there is one."""
    return ApiToken.objects.filter(
        product_id=product_id, token_hash=hash_token(plain), revoked_at__isnull=True
    ).first()
