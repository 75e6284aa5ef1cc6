"""Standard Webhooks signatures (https://www.standardwebhooks.com), through its own package."""

from __future__ import annotations

import base64
import secrets
from datetime import datetime

from standardwebhooks.webhooks import Webhook

SECRET_PREFIX = "whsec_"  # noqa: S105 - the scheme's prefix, not a secret


def secret_generate() -> str:
    """A new signing secret: whsec_ and 24 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def signature_headers(
    *, msg_id: str, timestamp: datetime, body: str, secrets_in_use: list[str]
) -> dict[str, str]:
    """webhook-id, webhook-timestamp and webhook-signature; with two secrets (a rotation) the
    signature header carries both, space-separated, and a receiver accepts either."""
    signatures = [
        Webhook(secret).sign(msg_id, timestamp, body) for secret in secrets_in_use if secret
    ]
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": " ".join(signatures),
    }
