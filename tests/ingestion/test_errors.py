"""Bad input gets a clear error in one body shape, and never touches stored data."""

import gzip
import json

import pytest

from engagement.models import User
from ingestion.models import AcceptedRequest

pytestmark = pytest.mark.both_databases


def assert_error(response, status: int, code: str, fields: list[str] | None = None) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code
    assert isinstance(body["message"], str) and body["message"]
    if fields is not None:
        assert sorted(body["fields"]) == sorted(fields)
    else:
        assert "fields" not in body
    return body


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("{not json", "invalid_json"),
        ("", "invalid_json"),
        ("\xff\xfe", "invalid_json"),
        ("[1, 2]", "invalid_body"),
        ('"a string"', "invalid_body"),
        ("null", "invalid_body"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_400(acme, post_json, raw, code):
    assert_error(post_json("/v2/track", raw, auth=acme.basic), 400, code)
    assert not AcceptedRequest.objects.exists()


@pytest.mark.parametrize(
    ("path", "body", "fields"),
    [
        ("/v2/identify", {}, ["userId"]),
        ("/v2/identify", {"userId": ""}, ["userId"]),
        ("/v2/identify", {"userId": "   "}, ["userId"]),
        ("/v2/identify", {"userId": 42}, ["userId"]),
        ("/v2/identify", {"userId": "u1", "groupId": ""}, ["groupId"]),
        ("/v2/identify", {"userId": "u1", "traits": ["a"]}, ["traits"]),
        ("/v2/identify", {"userId": "u1", "traits": "name=Ann"}, ["traits"]),
        ("/v2/group", {"userId": "u1"}, ["groupId"]),
        ("/v2/group", {"groupId": None}, ["groupId"]),
        ("/v2/group", {"groupId": "g1", "userId": ""}, ["userId"]),
        ("/v2/group", {"groupId": "g1", "traits": 3}, ["traits"]),
        ("/v2/track", {"userId": "u1"}, ["event"]),
        ("/v2/track", {"event": "A"}, ["userId"]),
        ("/v2/track", {"userId": "u1", "event": ""}, ["event"]),
        ("/v2/track", {"userId": "u1", "event": ["A"]}, ["event"]),
        ("/v2/track", {"userId": "", "event": ""}, ["userId", "event"]),
        (
            "/v2/track",
            {"userId": "u1", "event": "A", "context": {"groupId": ""}},
            ["context.groupId"],
        ),
        ("/v2/track", {"userId": "u1", "event": "A", "context": "g1"}, ["context"]),
        ("/v2/track", {"userId": "u" * 256, "event": "A"}, ["userId"]),
    ],
)
def test_field_rules_answer_400_naming_every_field_at_fault(acme, post_json, path, body, fields):
    assert_error(post_json(path, body, auth=acme.basic), 400, "invalid_fields", fields)
    assert not AcceptedRequest.objects.exists()


@pytest.mark.parametrize(
    "timestamp",
    ["yesterday", "2025-13-01T00:00:00Z", "", True, {"at": 1}, "99999999999999999999"],
)
def test_an_unparseable_timestamp_is_400(acme, post_json, timestamp):
    body = {"userId": "u1", "event": "A", "timestamp": timestamp}
    assert_error(
        post_json("/v2/track", body, auth=acme.basic), 400, "invalid_fields", ["timestamp"]
    )


def test_a_timestamp_more_than_a_day_ahead_is_400_and_just_under_a_day_is_fine(acme, post_json):
    from datetime import UTC, datetime, timedelta

    soon = (datetime.now(UTC) + timedelta(hours=23)).isoformat()
    later = (datetime.now(UTC) + timedelta(hours=25)).isoformat()

    ok = post_json("/v2/track", {"userId": "u1", "event": "A", "timestamp": soon}, auth=acme.basic)
    assert ok.status_code == 202
    body = assert_error(
        post_json("/v2/track", {"userId": "u1", "event": "A", "timestamp": later}, auth=acme.basic),
        400,
        "invalid_fields",
        ["timestamp"],
    )
    assert "24 hours" in body["fields"]["timestamp"][0]


@pytest.mark.parametrize(
    ("header", "code"),
    [
        (None, "missing_authorization"),
        ("", "missing_authorization"),
        ("Bearer abc", "invalid_authorization"),
        ("Basic", "invalid_authorization"),
        ("Basic a b", "invalid_authorization"),
        ("Basic Og==", "invalid_authorization"),  # base64 of ":" carries an empty key
    ],
)
def test_v2_without_a_well_formed_basic_header_is_400(acme, post_json, header, code):
    response = post_json("/v2/track", {"userId": "u1", "event": "A"}, auth=header)
    assert_error(response, 400, code)
    assert not AcceptedRequest.objects.exists()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"user_id": "u1", "event": "A"}, "missing_api_key"),
        ({"user_id": "u1", "event": "A", "api_key": ""}, "invalid_api_key"),
        ({"user_id": "u1", "event": "A", "api_key": 12}, "invalid_api_key"),
    ],
)
def test_v1_without_an_api_key_is_400(acme, post_json, body, code):
    assert_error(post_json("/v1/events", body), 400, code, ["api_key"])


def test_v1_field_names_are_snake_case(acme, post_json):
    body = {"userId": "u1", "event": "A", "api_key": acme.key.key}
    assert_error(post_json("/v1/events", body), 400, "invalid_fields", ["user_id"])


def test_a_body_over_32_kib_is_413(acme, post_json):
    body = {"userId": "u1", "traits": {"blob": "x" * 33_000}}
    assert_error(post_json("/v2/identify", body, auth=acme.basic), 413, "payload_too_large")
    assert not AcceptedRequest.objects.exists()


def test_a_gzip_body_over_32_kib_once_decompressed_is_413(acme, api_client):
    raw = gzip.compress(json.dumps({"userId": "u1", "traits": {"blob": "x" * 40_000}}).encode())
    assert len(raw) < 32 * 1024
    response = api_client.generic(
        "POST",
        "/v2/identify",
        raw,
        content_type="application/json",
        HTTP_AUTHORIZATION=acme.basic,
        HTTP_CONTENT_ENCODING="gzip",
    )
    assert_error(response, 413, "payload_too_large")


def test_a_gzip_body_is_accepted(acme, api_client, drain):
    raw = gzip.compress(json.dumps({"userId": "u1", "event": "Report_Created"}).encode())
    response = api_client.generic(
        "POST",
        "/v2/track",
        raw,
        content_type="application/json",
        HTTP_AUTHORIZATION=acme.basic,
        HTTP_CONTENT_ENCODING="gzip",
    )
    assert response.status_code == 202
    drain()
    assert User.objects.filter(product=acme.product, tracking_id="u1").exists()


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_other_methods_are_405(acme, api_client, method):
    response = getattr(api_client, method)("/v2/track", HTTP_AUTHORIZATION=acme.basic)
    assert_error(response, 405, "method_not_allowed")


def test_bad_input_leaves_stored_data_as_it_was(acme, post_json, drain):
    post_json("/v2/identify", {"userId": "u1", "traits": {"name": "Ann"}}, auth=acme.basic)
    drain()
    post_json("/v2/identify", {"userId": "u1", "traits": "oops"}, auth=acme.basic)
    post_json("/v2/identify", '{"userId": "u1", "traits": {"name": "Bob"', auth=acme.basic)
    drain()

    assert User.objects.get(product=acme.product, tracking_id="u1").traits == {"name": "Ann"}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"userId": "u1", "traits": {"score": NaN}}', None),
        ('{"userId": "u1", "traits": {"score": Infinity}}', None),
        ('{"userId": "u\\u0000x"}', "userId"),
        ('{"userId": "u1", "traits": {"note": "a\\u0000b"}}', "traits"),
        ('{"userId": "u1", "traits": {"nested": [{"k\\u0000": 1}]}}', "traits"),
        ('{"userId": "\\ud800"}', "userId"),
        ('{"userId": "u1", "traits": {"name": "\\udfff"}}', "traits"),
    ],
)
def test_values_no_database_can_store_are_400_not_a_retry_loop(acme, post_json, raw, field):
    response = post_json("/v2/identify", raw, auth=acme.basic)

    if field is None:
        assert_error(response, 400, "invalid_json")
    else:
        assert_error(response, 400, "invalid_fields", [field])
    assert not AcceptedRequest.objects.exists()


def test_unicode_that_can_be_stored_is_accepted(acme, post_json, drain):
    body = {"userId": "ü-😀", "traits": {"name": "Zoë 😀", "note": "tab\there"}}
    assert post_json("/v2/identify", body, auth=acme.basic).status_code == 202
    drain()
    assert User.objects.get(tracking_id="ü-😀").traits["name"] == "Zoë 😀"
