"""Content-Encoding: gzip on every ingestion endpoint; limits hold after gunzip; bombs stop."""

import functools
import gzip
import json
import tracemalloc
import zlib

import pytest

from engagement.models import Event
from ingestion import acceptance
from ingestion.models import AcceptedRequest
from tests.ingestion.segment_support import gzipped, segment_auth, track

pytestmark = pytest.mark.both_databases


@functools.cache
def gzip_bomb(expanded_bytes: int) -> bytes:
    """A gzip stream of `expanded_bytes` of JSON-looking padding, built without holding it."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b" " * (1024 * 1024)
    parts = [compressor.compress(b'{"batch": [], "pad": "')]
    for _ in range(expanded_bytes // len(chunk)):
        parts.append(compressor.compress(chunk))
    parts.append(compressor.compress(b'"}'))
    parts.append(compressor.flush())
    return b"".join(parts)


def post_gzip(post_json, path: str, body, *, auth: str | None):
    return post_json(path, gzipped(body), auth=auth, HTTP_CONTENT_ENCODING="gzip")


@pytest.mark.parametrize(
    ("path", "body", "auth_style", "status"),
    [
        ("/v2/track", {"userId": "usr_ann", "event": "E"}, "raw", 202),
        ("/v1/events", {"user_id": "usr_ann", "event": "E", "api_key": "<KEY>"}, None, 202),
        ("/segment", track("usr_ann", "E"), "segment", 202),
        ("/v1/batch", {"batch": [track("usr_ann", "E")]}, "segment", 200),
        ("/v1/import", {"batch": [track("usr_ann", "E")]}, "segment", 200),
    ],
)
def test_gzip_works_on_every_ingestion_endpoint(
    acme, post_json, drain, path, body, auth_style, status
):
    body = json.loads(json.dumps(body).replace("<KEY>", acme.key.key))
    auth = {"raw": acme.basic, "segment": segment_auth(acme.key.key), None: None}[auth_style]

    response = post_gzip(post_json, path, body, auth=auth)

    assert response.status_code == status, response.content
    drain()
    assert Event.objects.filter(product=acme.product, name="E").count() == 1


def test_the_single_call_limit_applies_to_the_gunzipped_size(acme, post_json):
    body = track("usr_ann", "E", properties={"pad": "x" * 40 * 1024})
    compressed = gzipped(body)
    assert len(compressed) < 2 * 1024

    response = post_json(
        "/segment", compressed, auth=segment_auth(acme.key.key), HTTP_CONTENT_ENCODING="gzip"
    )

    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


def test_a_gzipped_batch_above_512_kib_gunzipped_is_413(acme, post_json):
    items = [track(f"usr_{i}", "E", properties={"pad": "x" * 1000}) for i in range(600)]

    response = post_gzip(post_json, "/v1/batch", {"batch": items}, auth=segment_auth(acme.key.key))

    assert response.status_code == 413
    assert not AcceptedRequest.objects.exists()


@pytest.mark.parametrize("path", ["/segment", "/v1/batch", "/v2/track"])
def test_a_gzip_bomb_is_stopped_with_413(acme, post_json, path):
    bomb = gzip_bomb(200 * 1024 * 1024)  # 200 MiB of padding
    assert len(bomb) < 256 * 1024

    response = post_json(path, bomb, auth=segment_auth(acme.key.key), HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert not AcceptedRequest.objects.exists()


def test_a_bomb_is_never_expanded_into_memory():
    bomb = gzip_bomb(200 * 1024 * 1024)
    limit = 512 * 1024

    tracemalloc.start()
    try:
        with pytest.raises(acceptance.RequestError) as caught:
            acceptance.read_body(bomb, "gzip", limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert caught.value.status == 413
    assert peak < 4 * limit  # a bounded buffer, not 200 MiB


def test_a_bomb_split_over_several_gzip_members_is_stopped_too():
    member = gzip_bomb(200 * 1024 * 1024)
    with pytest.raises(acceptance.RequestError) as caught:
        acceptance.read_body(member + member, "gzip", 1024 * 1024)
    assert caught.value.status == 413


def test_a_bomb_above_the_raw_limit_is_refused_before_any_gunzip():
    bomb = gzip_bomb(200 * 1024 * 1024) * 3  # ~600 KiB of gzip expanding to 600 MiB
    assert len(bomb) > 512 * 1024

    with pytest.raises(acceptance.RequestError) as caught:
        acceptance.read_body(bomb, "gzip", 512 * 1024)

    assert caught.value.status == 413


def test_several_gzip_members_are_read_as_one_body(acme, post_json, drain):
    text = json.dumps({"batch": [track("usr_ann", "E"), track("usr_bob", "E")]}).encode()
    two_members = gzip.compress(text[:20]) + gzip.compress(text[20:])

    response = post_json(
        "/v1/batch", two_members, auth=segment_auth(acme.key.key), HTTP_CONTENT_ENCODING="gzip"
    )

    assert response.status_code == 200
    drain()
    assert Event.objects.count() == 2


def test_a_body_that_is_not_gzip_is_400(acme, post_json):
    response = post_json(
        "/v1/batch", b"plain bytes", auth=segment_auth(acme.key.key), HTTP_CONTENT_ENCODING="gzip"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_gzip"


def test_a_truncated_gzip_body_is_400(acme, post_json):
    whole = gzip.compress(json.dumps({"batch": [track("usr_ann", "E")] * 50}).encode())

    response = post_json(
        "/v1/batch", whole[:-20], auth=segment_auth(acme.key.key), HTTP_CONTENT_ENCODING="gzip"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_gzip"
    assert not AcceptedRequest.objects.exists()


def test_an_unsupported_encoding_is_refused(acme, post_json):
    response = post_json(
        "/segment", b"\x00\x01", auth=segment_auth(acme.key.key), HTTP_CONTENT_ENCODING="br"
    )

    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_encoding"
