"""Helpers for the Segment-family tests: how Segment SDKs authenticate and encode bodies."""

import base64
import gzip
import json
from datetime import UTC, datetime

from tests.ingestion.conftest import load_fixture


def segment_auth(key: str) -> str:
    """`Basic base64(<key>:)`, as Segment-family SDKs and destinations send it."""
    return "Basic " + base64.b64encode(f"{key}:".encode()).decode()


def iso_now(*, offset_seconds: float = 0.0) -> str:
    return datetime.fromtimestamp(datetime.now(UTC).timestamp() + offset_seconds, UTC).isoformat()


def gzipped(body: dict | bytes) -> bytes:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return gzip.compress(raw)


def sdk_batch(name: str, *, key: str) -> dict:
    """A captured SDK batch, sent now (an SDK stamps `sentAt` when it posts)."""
    body = load_fixture(f"batch/{name}", api_key=key)
    body["sentAt"] = iso_now()
    return body


def track(user_id: str, event: str, **extra) -> dict:
    return {"type": "track", "userId": user_id, "event": event, **extra}
