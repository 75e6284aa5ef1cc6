"""The ingestion door's contract over real HTTP (uvicorn, as production runs it): what a client
sees (status, body, headers) and what the acceptance store holds afterwards.
"""

import base64
import gzip
import json
import os
import signal
import time

import pytest

from ingestion.acceptance import digest_key
from ingestion.models import AcceptedRequest
from ingestion.store import backlog_refresh
from tests.ingestion.frontdoors import (
    database_url_of_tests,
    free_port,
    request,
    serve_in_subprocess,
    wait_for_http,
)


@pytest.fixture
def door(transactional_db, live_door):
    """The base URL of the door; the test database is shared with it."""
    backlog_refresh()  # the count another test's rows left in this process's cache is stale
    yield live_door.url


def post(url: str, path: str, body, *, auth: str | None = None, headers: dict | None = None):
    all_headers = dict(headers or {})
    if auth is not None:
        all_headers["Authorization"] = auth
    return request(url, "POST", path, body, all_headers)


def stored() -> list[AcceptedRequest]:
    return list(AcceptedRequest.objects.order_by("id"))


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# --- Accepted --------------------------------------------------------------------------------


def test_a_v2_track_is_stored_stripped_before_its_empty_202(door, acme):
    reply = post(
        door,
        "/v2/track",
        {
            "userId": "usr_ann",
            "event": "Report_Created",
            "timestamp": "2026-11-01T10:00:00Z",
            "properties": {"secret": "never stored"},
            "context": {"groupId": "acc_acme", "ip": "203.0.113.9"},
        },
        auth=acme.basic,
    )
    assert (reply.status, reply.content) == (202, b"")
    [row] = stored()
    assert row.endpoint == "v2/track"
    assert row.key_digest == digest_key(acme.key.key)
    assert row.messages == [
        {
            "type": "track",
            "timestamp": 1793527200000,
            "userId": "usr_ann",
            "event": "Report_Created",
            "groupId": "acc_acme",
        }
    ]
    assert "never stored" not in json.dumps(row.messages)
    assert "203.0.113.9" not in json.dumps(row.messages)


def test_the_base64_basic_form_and_a_trailing_slash_are_accepted(door, acme):
    credential = base64.b64encode(f"{acme.key.key}:".encode()).decode()
    reply = post(
        door,
        "/v2/identify/",
        {"userId": "usr_bo", "traits": {"plan": "pro"}},
        auth=f"Basic {credential}",
    )
    assert reply.status == 202
    [row] = stored()
    assert row.key_digest == digest_key(acme.key.key)
    assert row.messages[0]["traits"] == {"plan": "pro"}


def test_v1_takes_the_key_in_the_body_and_does_not_store_it(door, acme):
    reply = post(
        door,
        "/v1/events",
        {
            "api_key": acme.key.key,
            "user_id": "usr_cy",
            "event": "Login",
            "timestamp": 1793527200000,
        },
    )
    assert reply.status == 202
    [row] = stored()
    assert row.endpoint == "v1/events"
    assert row.key_digest == digest_key(acme.key.key)
    assert acme.key.key not in json.dumps(row.messages)


def test_an_unknown_key_is_accepted_for_the_worker_to_drop(door, db):
    reply = post(door, "/v2/group", {"groupId": "acc_x"}, auth="Basic not-a-key-of-anyone")
    assert reply.status == 202
    assert [row.key_digest for row in stored()] == [digest_key("not-a-key-of-anyone")]


def test_a_gzipped_body_is_accepted(door, acme):
    body = gzip.compress(json.dumps({"userId": "usr_di", "event": "Login"}).encode())
    reply = post(door, "/v2/track", body, auth=acme.basic, headers={"Content-Encoding": "gzip"})
    assert reply.status == 202
    assert stored()[0].messages[0]["userId"] == "usr_di"


def test_a_segment_message_is_accepted(door, acme):
    reply = post(
        door,
        "/segment",
        {"type": "track", "userId": "usr_ed", "event": "Login", "timestamp": now_iso()},
        auth=acme.basic,
    )
    assert reply.status == 202
    assert stored()[0].messages[0]["event"] == "Login"


def test_a_batch_answers_200_with_its_rejected_items_and_stores_the_rest(door, acme):
    batch = [
        {"type": "track", "userId": "usr_fa", "event": "Login", "timestamp": now_iso()},
        {"type": "track", "userId": "usr_fa"},
        {"type": "identify", "userId": "usr_fa", "traits": {"plan": "pro"}},
    ]
    reply = post(door, "/v1/batch", {"batch": batch, "sentAt": now_iso()}, auth=acme.basic)
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    body = reply.json()
    assert body["success"] is True
    assert [item["index"] for item in body["rejected"]] == [1]
    [row] = stored()
    assert [m["type"] for m in row.messages if m.get("userId") == "usr_fa"] == [
        "track",
        "identify",
    ]


# --- Refused ---------------------------------------------------------------------------------

TRACK = {"userId": "usr_ann", "event": "Login"}

# fmt: off
BAD_REQUESTS = [
    # (id, path, body, headers, status, code, field at fault)
    ("not-json", "/v2/track", "{not json", {}, 400, "invalid_json", None),
    ("empty", "/v2/track", "", {}, 400, "invalid_json", None),
    ("array", "/v2/track", "[1, 2]", {}, 400, "invalid_body", None),
    ("no-user", "/v2/track", {"event": "Login"}, {}, 400, "invalid_fields", "userId"),
    ("empty-event", "/v2/track", {"userId": "u", "event": ""}, {}, 400, "invalid_fields", "event"),
    ("traits-list", "/v2/identify", {"userId": "u", "traits": []}, {}, 400, "invalid_fields",
     "traits"),
    ("bad-time", "/v2/track", {**TRACK, "timestamp": "yesterday"}, {}, 400, "invalid_fields",
     "timestamp"),
    ("future", "/v2/track", {**TRACK, "timestamp": "2999-01-01T00:00:00Z"}, {}, 400,
     "invalid_fields", "timestamp"),
    ("no-auth", "/v2/track", TRACK, {"Authorization": None}, 400, "missing_authorization", None),
    ("bearer", "/v2/track", TRACK, {"Authorization": "Bearer abc"}, 400, "invalid_authorization",
     None),
    ("no-api-key", "/v1/events", {"user_id": "u", "event": "Login"}, {}, 400, "missing_api_key",
     "api_key"),
    ("brotli", "/v2/track", TRACK, {"Content-Encoding": "br"}, 415, "unsupported_encoding", None),
    ("bad-gzip", "/v2/track", "not gzip", {"Content-Encoding": "gzip"}, 400, "invalid_gzip", None),
    ("big", "/v2/track", {**TRACK, "pad": "x" * 33 * 1024}, {}, 413, "payload_too_large", None),
    ("gzip-bomb", "/v2/track", gzip.compress(b" " * 40 * 1024 + json.dumps(TRACK).encode()),
     {"Content-Encoding": "gzip"}, 413, "payload_too_large", None),
    ("batch-not-list", "/v1/batch", {"batch": {}}, {}, 400, "invalid_fields", "batch"),
]
# fmt: on


def test_bad_input_gets_the_same_clear_error_and_stores_nothing(door, acme):
    # One test walks every case: each transactional test costs a flush of the whole database.
    for case, path, body, headers, status, code, field in BAD_REQUESTS:
        sent = {"Authorization": acme.basic, **headers}
        sent = {name: value for name, value in sent.items() if value is not None}
        reply = post(door, path, body, headers=sent)
        assert reply.status == status, case
        assert reply.headers["content-type"] == "application/json", case
        error = reply.json()
        assert error["code"] == code, case
        assert error["message"], case
        if field:
            assert error["fields"][field], case
        else:
            assert "fields" not in error, case
    assert stored() == []


def test_other_methods_are_not_allowed(door, acme):
    for method in ("GET", "PUT", "DELETE"):
        reply = request(door, method, "/v2/track", headers={"Authorization": acme.basic})
        assert reply.status == 405, method
        assert reply.json()["code"] == "method_not_allowed", method
        assert "POST" in reply.headers["allow"], method


def test_a_backlog_over_its_limit_answers_503_with_retry_after(door, acme, settings):
    settings.INGESTION_BACKLOG_LIMIT = 1
    settings.INGESTION_RETRY_AFTER_SECONDS = 7
    assert post(door, "/v2/track", TRACK, auth=acme.basic).status == 202
    backlog_refresh()
    reply = post(door, "/v2/track", {**TRACK, "userId": "usr_late"}, auth=acme.basic)
    assert reply.status == 503
    assert reply.headers["retry-after"] == "7"
    assert reply.json()["code"] == "service_unavailable"
    assert [row.messages[0]["userId"] for row in stored()] == ["usr_ann"]


def test_the_rest_of_the_service_is_served_behind_the_door(door):
    reply = request(door, "GET", "/healthz")
    assert reply.status == 200
    assert reply.json()["database"] == "ok"


@pytest.mark.e2e
def test_a_database_that_cannot_be_reached_answers_503_with_retry_after(settings):
    """The service as its own server process, pointed at a PostgreSQL port nobody listens on."""
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_ENV": "embedded",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{free_port()}/nowhere",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "INGESTION_RETRY_AFTER_SECONDS": "9",
        "LOG_LEVEL": "CRITICAL",
    }
    server = serve_in_subprocess(port, env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_http(url, server)
        reply = post(url, "/v2/track", TRACK, auth="Basic some-key")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=15)
    assert reply.status == 503
    assert reply.headers["retry-after"] == "9"
    assert reply.json()["code"] == "service_unavailable"


@pytest.mark.e2e
def test_a_broker_that_cannot_be_reached_still_gets_a_stored_202(transactional_db, settings):
    """The wake-up to a worker is best effort: the sweep applies what a lost wake-up left."""
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_ENV": "embedded",
        "DATABASE_URL": database_url_of_tests(),
        "CELERY_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0",
        "LOG_LEVEL": "CRITICAL",
    }
    server = serve_in_subprocess(port, env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_http(url, server)
        reply = post(url, "/v2/track", TRACK, auth="Basic some-key")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=15)
    assert reply.status == 202
    assert [row.messages[0]["userId"] for row in stored()] == ["usr_ann"]
