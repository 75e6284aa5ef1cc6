"""Captured client payloads (fixtures/) for the ingestion tests."""

import json
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def load_fixture(relative: str, *, api_key: str | None = None) -> dict:
    """A captured client payload; `<API_KEY>` in v1 bodies becomes `api_key` when given."""
    text = (FIXTURES / relative).read_text()
    if api_key is not None:
        text = text.replace("<API_KEY>", api_key)
    return json.loads(text)
