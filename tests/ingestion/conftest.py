import json
from pathlib import Path

import pytest

from ingestion.services import accepted_requests_drain

FIXTURES = Path(__file__).parent / "fixtures"


def load_fixture(relative: str) -> dict:
    return json.loads((FIXTURES / relative).read_text())


@pytest.fixture
def drain():
    """Apply everything accepted so far, as a worker would."""

    def run() -> int:
        total = 0
        while applied := accepted_requests_drain(limit=1000).requests:
            total += applied
        return total

    return run


@pytest.fixture
def post_json(api_client):
    def post(path: str, body, *, auth: str | None = None, **extra):
        if auth is not None:
            extra["HTTP_AUTHORIZATION"] = auth
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        return api_client.generic("POST", path, data, content_type="application/json", **extra)

    return post
