"""The doors are one: requests on which the two doors' HTTP stacks could differ, each sent as raw
bytes to both over real HTTP. The same status, body and security headers, and
nothing stored unless the answer is a 2xx."""

import json
import socket
from urllib.parse import urlsplit

import pytest
from django.test import override_settings

from ingestion.models import AcceptedRequest
from ingestion.store import backlog_refresh
from tests.ingestion.frontdoors import AsgiDoor

SECURITY_HEADERS = (
    "x-content-type-options",
    "referrer-policy",
    "cross-origin-opener-policy",
    "x-frame-options",
)


@pytest.fixture(scope="module")
def asgi_door(django_db_setup, django_db_blocker):
    door = AsgiDoor().start()
    yield door
    with django_db_blocker.unblock():
        door.stop()


@pytest.fixture
def doors(transactional_db, live_server, asgi_door):
    backlog_refresh()  # the count another test's rows left in this process's cache is stale
    yield {"drf": live_server.url, "asgi": asgi_door.url}


def send(url: str, head: str, body: bytes = b"", *, close_write: bool = False):
    """Send a request as raw bytes: (status, lower-case headers, body), or None when the server
    closed the connection without an answer."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode("latin-1") + b"\r\n" + body)
        if close_write:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
                if _complete(received):
                    break
        except (ConnectionResetError, TimeoutError):
            pass
    if not received:
        return None
    head_bytes, _, content = received.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    if headers.get("transfer-encoding") == "chunked":
        content = _dechunked(content)
    return int(lines[0].split()[1]), headers, content


def _dechunked(content: bytes) -> bytes:
    body = b""
    while content:
        size_line, _, content = content.partition(b"\r\n")
        size = int(size_line, 16)
        body, content = body + content[:size], content[size + 2 :]
        if size == 0:
            break
    return body


def _complete(received: bytes) -> bool:
    head, sep, content = received.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(content) >= int(value)
    return False


def both(doors, head: str, body: bytes = b"", **kwargs) -> dict:
    return {name: send(url, head, body, **kwargs) for name, url in doors.items()}


def same_answer(answers: dict, *, ours: bool = True) -> tuple[int, object]:
    """The status and body both doors gave, after checking they are the same, security headers
    included (`ours`: an answer of the ingestion rules, which carries every one of them; Django
    leaves X-Frame-Options off an answer to a request it refused in its middleware)."""
    drf, asgi = answers["drf"], answers["asgi"]
    assert drf[0] == asgi[0]
    bodies = []
    for _status, headers, content in (drf, asgi):
        is_json = headers.get("content-type", "").startswith("application/json")
        bodies.append(json.loads(content) if is_json and content else content)
    assert bodies[0] == bodies[1]
    for name in SECURITY_HEADERS:
        assert drf[1].get(name) == asgi[1].get(name), name
        assert asgi[1].get(name) or not ours, name
    return drf[0], bodies[0]


def post_head(path: str, body: bytes, *extra: str, host: str = "127.0.0.1") -> str:
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json"]
    lines += [f"Content-Length: {len(body)}", "Connection: close", *extra]
    return "\n".join(lines) + "\n"


TRACK = json.dumps({"userId": "usr_ann", "event": "Report_Created"}).encode()


def test_two_authorization_headers_are_one_400(doors, acme):
    head = post_head(
        "/v2/track",
        TRACK,
        acme.basic.join(["Authorization: ", ""]),
        acme.basic.join(["Authorization: ", "x"]),
    )

    status, body = same_answer(both(doors, head, TRACK))

    assert (status, body["code"]) == (400, "invalid_authorization")
    assert not AcceptedRequest.objects.exists()


def test_two_content_encodings_are_one_415(doors, acme):
    head = post_head(
        "/v2/track",
        TRACK,
        f"Authorization: {acme.basic}",
        "Content-Encoding: gzip",
        "Content-Encoding: gzip",
    )

    status, body = same_answer(both(doors, head, TRACK))

    assert (status, body["code"]) == (415, "unsupported_encoding")


# `//v2/track` too, but gunicorn is needed for it (test_doors_differential.py): the test's WSGI
# server (Python's http.server) collapses leading slashes before Django sees the path.
@pytest.mark.parametrize("path", ["/v2/track//", "/v2//track"])
def test_a_path_django_does_not_route_is_one_404(doors, acme, path):
    status, _ = same_answer(
        ours=False,
        answers=both(doors, post_head(path, TRACK, f"Authorization: {acme.basic}"), TRACK),
    )

    assert status == 404
    assert not AcceptedRequest.objects.exists()


def test_a_trailing_slash_is_the_same_endpoint(doors, acme):
    head = post_head("/v2/track/", TRACK, f"Authorization: {acme.basic}")

    status, _ = same_answer(both(doors, head, TRACK))

    assert status == 202
    assert AcceptedRequest.objects.count() == 2


def test_a_host_outside_allowed_hosts_is_one_400(doors, acme):
    head = post_head("/v2/track", TRACK, f"Authorization: {acme.basic}", host="evil.example")

    with override_settings(ALLOWED_HOSTS=["127.0.0.1", "localhost"], DEBUG=False):
        status, _ = same_answer(both(doors, head, TRACK), ours=False)

    assert status == 400
    assert not AcceptedRequest.objects.exists()


def test_a_header_longer_than_8190_bytes_is_one_431(doors, acme):
    head = post_head("/v2/track", TRACK, f"Authorization: {acme.basic}", "X-Pad: " + "p" * 8200)

    status, body = same_answer(both(doors, head, TRACK))

    assert (status, body["code"]) == (431, "request_header_fields_too_large")


def test_more_than_100_header_fields_are_a_431(doors, acme):
    # Only the ASGI door here: the test's WSGI server (Python's http.server) refuses more than
    # 100 fields itself; gunicorn, configured to take more, is held to the same answer in
    # test_doors_differential.py.
    padding = [f"X-Pad-{i}: {i}" for i in range(100)]
    head = post_head("/v2/track", TRACK, f"Authorization: {acme.basic}", *padding)

    status, headers, content = send(doors["asgi"], head, TRACK)

    assert (status, json.loads(content)["code"]) == (431, "request_header_fields_too_large")


def test_a_request_target_longer_than_4094_bytes_is_one_414(doors, acme):
    head = post_head("/v2/track?" + "q" * 4100, TRACK, f"Authorization: {acme.basic}")

    status, _ = same_answer(both(doors, head, TRACK))

    assert status == 414


def test_deep_traits_are_one_400_not_a_500(doors, acme):
    depth = 945  # the WSGI door answered 500 from 941 to 947
    deep = b'{"userId": "usr_ann", "traits": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}"
    head = post_head("/v2/identify", deep, f"Authorization: {acme.basic}")

    status, body = same_answer(both(doors, head, deep))

    assert status == 400
    assert not AcceptedRequest.objects.exists()


def test_an_accepted_call_carries_the_security_headers_on_both_doors(doors, acme):
    status, _ = same_answer(
        both(doors, post_head("/v2/track", TRACK, f"Authorization: {acme.basic}"), TRACK)
    )

    assert status == 202


def test_a_body_shorter_than_its_content_length_is_never_stored(doors, acme):
    head = post_head("/v2/track", TRACK + b" " * 50, f"Authorization: {acme.basic}")

    answers = both(doors, head, TRACK, close_write=True)

    assert not AcceptedRequest.objects.exists()
    for answer in answers.values():
        assert answer is None or answer[0] >= 400
