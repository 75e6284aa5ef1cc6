"""Requests are throttled per token: 429 with Retry-After and the one error body."""

import pytest


@pytest.fixture
def three_per_minute(settings):
    settings.READ_API_THROTTLE_RATE = "3/minute"


@pytest.mark.usefixtures("three_per_minute")
def test_fourth_request_in_a_minute_is_429_with_retry_after(read, acme):
    for _ in range(3):
        assert read(acme, "/v2/workspaces").status_code == 200

    response = read(acme, "/v2/workspaces")

    assert response.status_code == 429
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= 60
    body = response.json()
    assert body["code"] == "throttled"
    assert "retry in" in body["message"]


@pytest.mark.usefixtures("three_per_minute")
def test_throttle_counts_each_token_separately(read, acme, globex):
    for _ in range(3):
        read(acme, "/v2/workspaces")
    assert read(acme, "/v2/workspaces").status_code == 429
    assert read(globex, "/v2/workspaces").status_code == 200


@pytest.mark.usefixtures("three_per_minute")
def test_requests_without_a_valid_token_get_401_not_429(read, acme):
    for _ in range(5):
        assert read(None, "/v2/workspaces").status_code == 401


def test_empty_rate_turns_throttling_off(settings, read, acme):
    settings.READ_API_THROTTLE_RATE = ""
    for _ in range(5):
        assert read(acme, "/v2/workspaces").status_code == 200


def test_a_cache_outage_does_not_fail_reads(settings, read, acme, monkeypatch):
    settings.READ_API_THROTTLE_RATE = "3/minute"

    def cache_down(*args, **kwargs):
        raise ConnectionError("cache unavailable")

    monkeypatch.setattr("readapi.throttling.cache.add", cache_down)
    for _ in range(5):
        assert read(acme, "/v2/workspaces").status_code == 200


@pytest.mark.usefixtures("three_per_minute", "shared_redis_cache")
def test_throttle_counts_in_redis(read, acme):
    for _ in range(3):
        assert read(acme, "/v2/workspaces").status_code == 200

    response = read(acme, "/v2/workspaces")

    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
