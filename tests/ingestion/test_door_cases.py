"""Hostile and odd bodies, one of each class the two-door differential suite pinned (it went
with the second door): each gets one clear answer, a non-2xx stores nothing, and what is stored
applies without an `apply_failed` drop. In-process (tests/doorclient.py): these are the rules'
cases, not the server's (those are in test_door_http.py)."""

import gzip
import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingestion.models import AcceptedRequest, DroppedRequest

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

TRACK = b'{"userId":"usr_reg","event":"Login"}'


def nested(depth: int) -> str:
    inner = depth - 1
    return '{"a":' * inner + "{}" + "}" * inner


def identify_with_traits(traits: str) -> bytes:
    return ('{"userId":"usr_reg","traits":' + traits + "}").encode("utf-8", "surrogatepass")


def track_with(**extra) -> bytes:
    return json.dumps({"userId": "usr_reg", "event": "Login", **extra}).encode()


def segment_at(timestamp: str, sent_at: str) -> bytes:
    message = {"type": "track", "userId": "usr_reg", "event": "Login", "timestamp": timestamp}
    return json.dumps({**message, "sentAt": sent_at}).encode()


NOW_ISO = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
BATCH_OF_THREE = json.dumps(
    {
        "batch": [
            {"type": "identify", "userId": "usr_reg", "traits": {"plan": "pro"}},
            {"type": "group", "groupId": "acct_reg", "userId": "usr_reg"},
            {"type": "track", "userId": "usr_reg", "event": "Login", "messageId": "m-1"},
        ],
        "sentAt": NOW_ISO,
    }
).encode()

# name: (endpoint, body, extra headers, status, messages stored)
CASES = {
    "gzip body": ("v2/track", gzip.compress(TRACK, mtime=0), {"gzip": True}, 202, 1),
    "truncated gzip body": ("v2/track", gzip.compress(TRACK, mtime=0)[:-6], {"gzip": True}, 400, 0),
    "gzip bomb (5 MB of spaces)": (
        "v2/track",
        gzip.compress(TRACK[:-1] + b" " * 5_000_000 + b"}", mtime=0),
        {"gzip": True},
        413,
        0,
    ),
    "traits 40 levels deep": ("v2/identify", identify_with_traits(nested(40)), {}, 400, 0),
    "v2 timestamp 1969-12-31T23:59:59Z": (
        "v2/track",
        track_with(timestamp="1969-12-31T23:59:59Z"),
        {},
        400,
        0,
    ),
    "segment timestamp 0001-01-01, sentAt in 9999": (
        "segment",
        segment_at("0001-01-01T00:00:00Z", "9999-01-01T00:00:00Z"),
        {},
        400,
        0,
    ),
    "segment timestamp 2020, sentAt in 9999 (corrected before year 1)": (
        "segment",
        segment_at("2020-01-01T00:00:00Z", "9999-01-01T00:00:00Z"),
        {},
        400,
        0,
    ),
    "big numbers in traits": (
        "v2/identify",
        identify_with_traits('{"n":18446744073709551616,"m":-1e40,"f":1.7976931348623157e308}'),
        {},
        202,
        1,
    ),
    "NUL in properties (never stored)": (
        "v2/track",
        track_with(properties={"note": "a\x00b"}),
        {},
        202,
        1,
    ),
    "NUL in a trait": ("v2/identify", identify_with_traits('{"a":"x\\u0000y"}'), {}, 400, 0),
    "lone surrogate in a trait, escaped": (
        "v2/identify",
        identify_with_traits('{"a":"\\ud800"}'),
        {},
        400,
        0,
    ),
    "lone surrogate in a trait, as raw bytes": (
        "v2/identify",
        identify_with_traits('{"a":"\ud800"}'),
        {},
        400,
        0,
    ),
    "duplicate userId key": (
        "v2/track",
        b'{"userId":"usr_a","event":"Login","userId":"usr_b"}',
        {},
        202,
        1,
    ),
    "byte order mark": ("v2/track", b"\xef\xbb\xbf" + TRACK, {}, 202, 1),
    "NaN in traits": ("v2/identify", identify_with_traits('{"a":NaN}'), {}, 400, 0),
    "a JSON array body": ("v2/track", b"[]", {}, 400, 0),
    "userId of 256 characters": ("v2/track", track_with(userId="x" * 256), {}, 400, 0),
    "userId of 255 emoji": ("v2/track", track_with(userId="😀" * 255), {}, 202, 1),
    "a valid Segment batch of three messages": ("v1/batch", BATCH_OF_THREE, {}, 200, 3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_case_gets_one_clear_answer(acme, post_json, drain, name):
    endpoint, body, extra, status, stored = CASES[name]
    headers = {"HTTP_CONTENT_ENCODING": "gzip"} if extra.get("gzip") else {}

    response = post_json(f"/{endpoint}", body, auth=acme.basic, **headers)

    assert response.status_code == status, response.content
    if status >= 400:
        assert response.json()["code"]
    messages = sum(len(row.messages) for row in AcceptedRequest.objects.all())
    assert messages == stored
    drain()
    assert not DroppedRequest.objects.filter(reason="apply_failed").exists()
    assert not AcceptedRequest.objects.exists()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
fields = st.fixed_dictionaries(
    {},
    optional={
        "userId": json_values | st.text(min_size=1, max_size=12),
        "groupId": json_values | st.text(min_size=1, max_size=12),
        "event": json_values | st.text(min_size=1, max_size=12),
        "previousId": json_values | st.text(min_size=1, max_size=12),
        "anonymousId": json_values | st.text(min_size=1, max_size=12),
        "type": st.sampled_from(["identify", "group", "track", "page", "alias", 7]),
        "traits": json_values,
        "timestamp": json_values,
        "sentAt": json_values,
    },
)
ENDPOINTS = ["v2/identify", "v2/group", "v2/track", "segment", "v1/batch", "v1/t", "v1/a"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(endpoint=st.sampled_from(ENDPOINTS), message=fields)
def test_any_body_is_answered_and_only_a_2xx_is_stored(acme, post_json, drain, endpoint, message):
    body = {"batch": [message]} if endpoint == "v1/batch" else message

    response = post_json(f"/{endpoint}", json.dumps(body), auth=acme.basic)

    assert response.status_code in (200, 202, 400, 413), response.content
    if response.status_code >= 400:
        assert not AcceptedRequest.objects.exists()
        assert response.json()["code"]
    drain()
    assert not DroppedRequest.objects.filter(reason="apply_failed").exists()
    assert not AcceptedRequest.objects.exists()


# --- No content negotiation: the answer is the same whatever the client asks for -------------


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "application/json; indent=4"])
def test_any_accept_gets_the_202_and_the_call_is_stored(acme, post_json, accept):
    response = post_json("/v2/track", TRACK, auth=acme.basic, HTTP_ACCEPT=accept)

    assert (response.status_code, response.content) == (202, b"")
    assert AcceptedRequest.objects.count() == 1


def test_format_xml_in_the_query_is_the_same_202(acme, post_json):
    response = post_json("/v2/track?format=xml", TRACK, auth=acme.basic)

    assert (response.status_code, response.content) == (202, b"")
    assert AcceptedRequest.objects.count() == 1


@pytest.mark.parametrize("accept", ["application/json; indent=4", "text/html"])
def test_an_error_is_compact_json_whatever_accept_says(acme, post_json, accept):
    response = post_json("/v2/track?format=api", b"{}", auth=acme.basic, HTTP_ACCEPT=accept)

    assert (response.status_code, response["Content-Type"]) == (400, "application/json")
    assert response.content == json.dumps(response.json(), separators=(",", ":")).encode()


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_other_methods_are_a_405_naming_post(acme, api_client, method):
    response = getattr(api_client, method)("/v2/track", HTTP_AUTHORIZATION=acme.basic)

    assert (response.status_code, response["Allow"]) == (405, "POST, OPTIONS")
    assert response.json()["code"] == "method_not_allowed"
