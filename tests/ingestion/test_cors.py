"""CORS on every ingestion path (a browser on any origin may send with a write key), a key's
origin allowlist, the per-key rate limit, and no CORS at all on the read API and the dashboard
(a token must never be usable from a web page)."""

import json
import time
from types import SimpleNamespace

import pytest
import requests
from django.core.cache import cache
from django.core.exceptions import ValidationError

from ingestion import key_checks
from ingestion.acceptance import ENDPOINTS
from ingestion.models import AcceptedRequest
from ingestion.services.keys import ingestion_key_origins_set
from ingestion.store import backlog_refresh
from tests.ingestion.segment_support import segment_auth

pytestmark = pytest.mark.both_databases

PAGE = "https://app.acme.test"


def track(client, acme, *, origin: str | None = PAGE, path="/v1/t"):
    extra = {"HTTP_AUTHORIZATION": segment_auth(acme.key.key)}
    if origin is not None:
        extra["HTTP_ORIGIN"] = origin
    body = json.dumps({"userId": "ann", "event": "E"})
    return client.generic("POST", path, body, content_type="text/plain", **extra)


@pytest.mark.parametrize("path", sorted(f"/{name}" for name in ENDPOINTS))
def test_every_ingestion_path_answers_a_preflight(db, api_client, path):
    response = api_client.options(
        path,
        HTTP_ORIGIN=PAGE,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization,content-type",
    )

    assert response.status_code == 204
    assert response["Access-Control-Allow-Origin"] == PAGE
    assert "POST" in response["Access-Control-Allow-Methods"]
    allowed = {h.strip() for h in response["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type"} <= allowed
    assert int(response["Access-Control-Max-Age"]) > 0
    assert not AcceptedRequest.objects.exists()


def test_an_answer_names_the_origin_so_the_page_can_read_it(acme, api_client):
    response = track(api_client, acme)

    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == PAGE
    assert response["Vary"] == "origin"


def test_an_error_names_the_origin_too(acme, api_client):
    response = api_client.generic(
        "POST", "/v1/t", "{}", content_type="text/plain", HTTP_ORIGIN=PAGE
    )

    assert response.status_code == 401
    assert response["Access-Control-Allow-Origin"] == PAGE


def test_a_server_side_request_gets_no_cors_headers(acme, api_client):
    response = track(api_client, acme, origin=None)

    assert response.status_code == 200
    assert not response.has_header("Access-Control-Allow-Origin")


def test_a_key_with_an_allowlist_takes_its_origins(acme, api_client):
    ingestion_key_origins_set(key_id=acme.key.id, allowed_origins=f"{PAGE}/\nhttps://b.test")

    assert track(api_client, acme, origin=PAGE).status_code == 200
    assert track(api_client, acme, origin="https://B.test").status_code == 200
    assert AcceptedRequest.objects.count() == 2


def test_a_key_with_an_allowlist_refuses_other_origins_before_storing(acme, api_client):
    ingestion_key_origins_set(key_id=acme.key.id, allowed_origins=PAGE)

    response = track(api_client, acme, origin="https://evil.test")

    assert (response.status_code, response.json()["code"]) == (403, "origin_not_allowed")
    assert "https://evil.test" in response.json()["message"]
    assert response["Access-Control-Allow-Origin"] == "https://evil.test"  # the page reads why
    assert not AcceptedRequest.objects.exists()


@pytest.mark.parametrize("text", ["app.acme.test", "https://a.test/path", "ftp://a.test"])
def test_an_allowlist_line_that_is_no_origin_is_refused(acme, text):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="is not an origin"):
        ingestion_key_origins_set(key_id=acme.key.id, allowed_origins=text)


def test_over_the_key_rate_limit_is_a_429_with_retry_after(acme, api_client, settings, monkeypatch):
    settings.INGESTION_KEY_RATE_LIMIT = "2/minute"
    cache.clear()
    # The count is kept per fixed minute: three requests across a minute's end would count in
    # two windows (the likeliest reading of a CI run's 200, 200, 200). The rule's clock reads 20 s
    # into a minute.
    twenty_seconds_in = (time.time() // 60) * 60 + 20
    monkeypatch.setattr(
        key_checks,
        "time",
        SimpleNamespace(time=lambda: twenty_seconds_in, monotonic=time.monotonic),
    )

    answers = [track(api_client, acme) for _ in range(3)]

    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[2].json()["code"] == "rate_limited"
    assert answers[2]["Retry-After"] == "40"  # the window's end
    assert answers[2]["Access-Control-Expose-Headers"] == "retry-after"
    assert AcceptedRequest.objects.count() == 2


def test_the_rate_limit_is_per_key(acme, globex, api_client, settings):
    settings.INGESTION_KEY_RATE_LIMIT = "1/minute"
    cache.clear()

    assert track(api_client, acme).status_code == 200
    assert track(api_client, globex).status_code == 200
    assert track(api_client, acme).status_code == 429


def test_the_read_api_and_the_dashboard_send_no_cors_headers(acme, client):
    for path in ("/api/v1/accounts", f"/w/{acme.workspace.id}/"):
        response = client.get(path, HTTP_ORIGIN=PAGE, HTTP_AUTHORIZATION=acme.bearer)
        assert not response.has_header("Access-Control-Allow-Origin"), path
        preflight = client.options(path, HTTP_ORIGIN=PAGE, HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET")
        assert not preflight.has_header("Access-Control-Allow-Origin"), path


@pytest.mark.e2e
def test_over_real_http_the_allowlist_is_read_on_a_thread(acme, live_door):
    backlog_refresh()
    ingestion_key_origins_set(key_id=acme.key.id, allowed_origins=PAGE)
    headers = {"Authorization": segment_auth(acme.key.key), "Content-Type": "text/plain"}
    body = json.dumps({"userId": "ann", "event": "E"})

    url = f"{live_door.url}/v1/t"
    refused = requests.post(url, body, headers={**headers, "Origin": "https://e.test"}, timeout=10)
    taken = requests.post(url, body, headers={**headers, "Origin": PAGE}, timeout=10)

    assert (refused.status_code, taken.status_code) == (403, 200)
    assert taken.headers["Access-Control-Allow-Origin"] == PAGE
    assert AcceptedRequest.objects.count() == 1


def test_a_cache_that_cannot_be_reached_is_a_503_and_nothing_stored(acme, api_client, settings):
    settings.INGESTION_KEY_RATE_LIMIT = "5/second"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
        }
    }

    response = track(api_client, acme)

    assert (response.status_code, response.json()["code"]) == (503, "service_unavailable")
    assert response["Retry-After"]
    assert not AcceptedRequest.objects.exists()


def test_an_allowlist_over_ten_thousand_characters_is_refused_and_nothing_changes(
    acme, admin_client
):
    ingestion_key_origins_set(key_id=acme.key.id, allowed_origins=PAGE)
    text = "\n".join(f"https://app{n:04}.example.com" for n in range(400)) + "\nhttps://b.test"

    with pytest.raises(ValidationError, match="at most 10,000 characters"):
        ingestion_key_origins_set(key_id=acme.key.id, allowed_origins=text)
    page = admin_client.post(
        f"/admin/ingestion/ingestionkey/{acme.key.id}/change/",
        {"label": "k", "allowed_origins": text},
    )

    assert page.status_code == 200 and "at most 10,000 characters" in page.content.decode()
    acme.key.refresh_from_db()
    assert acme.key.allowed_origins == PAGE
