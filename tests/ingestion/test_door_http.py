"""The ingestion door over real HTTP, where the server has a say: requests sent as raw bytes to
uvicorn (uvloop, httptools, as production runs it) in a thread of the test process. The status,
the body, the security headers, and nothing stored unless the answer is a 2xx.

These are the cases on which the second door (gunicorn and DRF, since removed) answered
differently; the one door answers each of them one way, held here."""

import json
import socket
from urllib.parse import unquote, urlsplit

import pytest
from django.test import override_settings

from ingestion.acceptance import http
from ingestion.acceptance.errors import RequestError
from ingestion.models import AcceptedRequest
from ingestion.store import backlog_refresh

SECURITY_HEADERS = (
    "x-content-type-options",
    "referrer-policy",
    "cross-origin-opener-policy",
    "x-frame-options",
)


@pytest.fixture
def door(transactional_db, live_door):
    backlog_refresh()  # the count another test's rows left in this process's cache is stale
    yield live_door.url


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


def answer(reply, *, ours: bool = True) -> tuple[int, object]:
    """The status and body (parsed when JSON); `ours`: an answer of the door itself, which
    carries every security header."""
    status, headers, content = reply
    is_json = headers.get("content-type", "").startswith("application/json")
    if ours:
        for name in SECURITY_HEADERS:
            assert headers.get(name), name
    return status, json.loads(content) if is_json and content else content


def post_head(path: str, body: bytes, *extra: str, host: str = "127.0.0.1") -> str:
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json"]
    lines += [f"Content-Length: {len(body)}", "Connection: close", *extra]
    return "\n".join(lines) + "\n"


TRACK = json.dumps({"userId": "usr_ann", "event": "Report_Created"}).encode()


def test_an_accepted_call_is_an_empty_202_with_the_security_headers(door, acme):
    reply = send(door, post_head("/v2/track", TRACK, f"Authorization: {acme.basic}"), TRACK)

    assert answer(reply) == (202, b"")
    assert AcceptedRequest.objects.count() == 1


# --- Content negotiation: none. Ingestion answers JSON whatever Accept or ?format= says. -----


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "*/*", "image/png"])
def test_any_accept_header_gets_the_same_202_and_the_call_is_stored(door, acme, accept):
    head = post_head("/v2/track", TRACK, f"Authorization: {acme.basic}", f"Accept: {accept}")

    assert answer(send(door, head, TRACK)) == (202, b"")
    assert AcceptedRequest.objects.count() == 1


def test_format_xml_in_the_query_is_no_404_and_the_call_is_stored(door, acme):
    head = post_head("/v2/track?format=xml", TRACK, f"Authorization: {acme.basic}")

    assert answer(send(door, head, TRACK)) == (202, b"")
    assert AcceptedRequest.objects.count() == 1


@pytest.mark.parametrize("path", ["/v2/track?format=xml", "/v2/track?format=json"])
def test_an_error_is_compact_json_whatever_accept_says(door, acme, path):
    head = post_head(
        path, b"{}", f"Authorization: {acme.basic}", "Accept: application/json; indent=4"
    )

    status, headers, content = send(door, head, b"{}")

    assert (status, headers["content-type"]) == (400, "application/json")
    assert content == json.dumps(json.loads(content), separators=(",", ":")).encode()


# --- Header fields: every field counts, underscores too --------------------------------------


def test_a_header_name_with_an_underscore_is_a_field_like_any_other(door, acme):
    head = post_head("/v2/track", TRACK, f"Authorization: {acme.basic}", "X_Under: 1")

    assert answer(send(door, head, TRACK)) == (202, b"")


def test_100_fields_and_one_with_an_underscore_are_a_431(door, acme):
    fields = [f"X-Pad-{i}: {i}" for i in range(100 - 4)]  # with Host, Content-*, Connection
    head = post_head("/v2/track", TRACK, *fields[:-1], f"Authorization: {acme.basic}")
    assert answer(send(door, head, TRACK)) == (202, b"")  # 100 fields

    status, body = answer(send(door, head + "X_Under: 1\n", TRACK))

    assert (status, body["code"]) == (431, "request_header_fields_too_large")
    assert AcceptedRequest.objects.count() == 1


@pytest.mark.parametrize("count", [100, 210])
def test_more_than_100_header_fields_are_a_431(door, acme, count):
    padding = [f"X-Pad-{i}: {i}" for i in range(count)]
    head = post_head("/v2/track", TRACK, f"Authorization: {acme.basic}", *padding)

    status, body = answer(send(door, head, TRACK))

    assert (status, body["code"]) == (431, "request_header_fields_too_large")
    assert not AcceptedRequest.objects.exists()


@pytest.mark.parametrize("size", [8200, 9000, 66_000])
def test_a_header_longer_than_8190_bytes_is_a_431(door, acme, size):
    head = post_head("/v2/track", TRACK, f"Authorization: {acme.basic}", "X-Pad: " + "p" * size)

    status, body = answer(send(door, head, TRACK))

    assert (status, body["code"]) == (431, "request_header_fields_too_large")


def test_header_lines_each_within_8190_bytes_but_longer_together_are_taken(door, acme):
    padding = [f"X-Pad-{i}: " + "p" * 5000 for i in range(3)]
    head = post_head("/v2/track", TRACK, f"Authorization: {acme.basic}", *padding)

    status, _ = answer(send(door, head, TRACK))

    assert status == 202
    assert AcceptedRequest.objects.count() == 1


def test_a_head_as_an_asgi_server_may_pass_it_mixed_case_and_repeated_is_read_one_way():
    as_lower_case = http.read_head([(b"host", b"127.0.0.1"), (b"x-tag", b"a"), (b"x-tag", b"b")])
    as_sent = http.read_head(iter([(b"Host", b"127.0.0.1"), (b"X-Tag", b"a"), (b"x-tag", b"b")]))

    assert as_lower_case == as_sent == {b"host": b"127.0.0.1", b"x-tag": b"a,b"}
    assert as_sent.value(b"host") == "127.0.0.1"
    assert as_sent.value(b"origin") is None


def test_a_repeated_field_whose_joined_line_is_too_long_is_a_431():
    pair = [(b"x-pad", b"p" * 4100), (b"X-Pad", b"p" * 4100)]

    with pytest.raises(RequestError) as raised:
        http.read_head([(b"host", b"127.0.0.1"), *pair])

    assert (raised.value.status, raised.value.code) == (431, "request_header_fields_too_large")
    assert "'x-pad'" in raised.value.message


def test_two_authorization_headers_are_one_400(door, acme):
    head = post_head(
        "/v2/track",
        TRACK,
        acme.basic.join(["Authorization: ", ""]),
        acme.basic.join(["Authorization: ", "x"]),
    )

    status, body = answer(send(door, head, TRACK))

    assert (status, body["code"]) == (400, "invalid_authorization")
    assert not AcceptedRequest.objects.exists()


def test_two_content_encodings_are_one_415(door, acme):
    head = post_head(
        "/v2/track",
        TRACK,
        f"Authorization: {acme.basic}",
        "Content-Encoding: gzip",
        "Content-Encoding: gzip",
    )

    status, body = answer(send(door, head, TRACK))

    assert (status, body["code"]) == (415, "unsupported_encoding")


@pytest.mark.parametrize("field", ["Host: 127.0.0.1", "Content-Type: application/json"])
def test_a_field_that_must_come_once_sent_twice_is_a_json_400(door, acme, field):
    head = post_head("/v2/track", TRACK, f"Authorization: {acme.basic}", field)

    status, body = answer(send(door, head, TRACK))

    assert (status, body["code"]) == (400, "invalid_header")
    assert not AcceptedRequest.objects.exists()


def test_a_host_outside_allowed_hosts_is_a_json_400(door, acme):
    head = post_head("/v2/track", TRACK, f"Authorization: {acme.basic}", host="evil.example")

    with override_settings(ALLOWED_HOSTS=["127.0.0.1", "localhost"], DEBUG=False):
        status, body = answer(send(door, head, TRACK), ours=False)

    assert (status, body["code"]) == (400, "bad_request")
    assert not AcceptedRequest.objects.exists()


# --- The request target: path and query, measured alike in every form ------------------------


@pytest.mark.parametrize("absolute", [False, True], ids=["origin-form", "absolute-form"])
def test_a_request_target_of_4094_bytes_is_taken_and_4095_is_a_414(door, acme, absolute):
    prefix = door if absolute else ""
    fits = "/v2/track?q=" + "q" * (4094 - len("/v2/track?q="))
    head = post_head(prefix + fits, TRACK, f"Authorization: {acme.basic}")
    assert answer(send(door, head, TRACK)) == (202, b"")

    head = post_head(prefix + fits + "q", TRACK, f"Authorization: {acme.basic}")
    status, body = answer(send(door, head, TRACK))

    assert (status, body["code"]) == (414, "uri_too_long")
    assert AcceptedRequest.objects.count() == 1


def test_a_request_target_of_9_kb_is_a_414(door, acme):
    head = post_head("/v2/track?q=" + "x" * 9000, TRACK, f"Authorization: {acme.basic}")

    status, body = answer(send(door, head, TRACK))

    assert (status, body["code"]) == (414, "uri_too_long")


def test_a_trailing_slash_is_the_same_endpoint(door, acme):
    head = post_head("/v2/track/", TRACK, f"Authorization: {acme.basic}")

    assert answer(send(door, head, TRACK)) == (202, b"")
    assert AcceptedRequest.objects.count() == 1


@pytest.mark.parametrize(
    "path",
    ["/v2/track//", "/v2//track", "//v2/track", "//v1/batch", "//segment", "/V2/TRACK"],
)
def test_a_path_that_is_no_endpoint_is_the_json_404(door, acme, path):
    head = post_head(path, TRACK, f"Authorization: {acme.basic}")

    status, body = answer(send(door, head, TRACK), ours=False)

    assert (status, body) == (
        404,
        {"code": "not_found", "message": f"There is no endpoint at {path}."},
    )
    assert not AcceptedRequest.objects.exists()


@pytest.mark.parametrize("path", ["/v2/track%FF", "/v2/%FFtrack", "/v1/batch%ff"])
def test_a_path_with_a_byte_that_is_no_utf8_is_the_json_404(door, acme, path):
    head = post_head(path, TRACK, f"Authorization: {acme.basic}")

    status, body = answer(send(door, head, TRACK), ours=False)

    assert (status, body) == (
        404,
        {"code": "not_found", "message": f"There is no endpoint at {unquote(path)}."},
    )
    assert not AcceptedRequest.objects.exists()


# --- Bodies and framing ----------------------------------------------------------------------


def test_deep_traits_are_a_400_not_a_500(door, acme):
    depth = 945
    deep = b'{"userId": "usr_ann", "traits": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}"
    head = post_head("/v2/identify", deep, f"Authorization: {acme.basic}")

    status, body = answer(send(door, head, deep))

    assert status == 400
    assert not AcceptedRequest.objects.exists()


def test_a_body_shorter_than_its_content_length_is_never_stored(door, acme):
    head = post_head("/v2/track", TRACK + b" " * 50, f"Authorization: {acme.basic}")

    reply = send(door, head, TRACK, close_write=True)

    assert not AcceptedRequest.objects.exists()
    assert reply is None  # the client stopped sending: uvicorn closes without an answer


def chunked_head(path: str, *extra: str) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += ["Transfer-Encoding: chunked", "Connection: close", *extra]
    return "\n".join(lines) + "\n"


def chunked(body: bytes, size: int = 10) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)


def test_a_chunked_body_is_read_whole_and_stored(door, acme):
    reply = send(
        door,
        chunked_head("/v2/track", f"Authorization: {acme.basic}"),
        chunked(TRACK) + b"0\r\n\r\n",
    )

    assert answer(reply) == (202, b"")
    [row] = AcceptedRequest.objects.all()
    assert row.messages[0]["userId"] == "usr_ann"


def test_a_chunked_body_without_its_last_chunk_is_never_stored(door, acme):
    head = chunked_head("/v2/track", f"Authorization: {acme.basic}")

    reply = send(door, head, chunked(TRACK), close_write=True)

    assert not AcceptedRequest.objects.exists()
    assert reply is None  # the client stopped sending: uvicorn closes without an answer


@pytest.mark.parametrize(
    "extra, body",
    [
        (("Transfer-Encoding: chunked",), b"zz\r\n" + TRACK + b"\r\n0\r\n\r\n"),
        (("Transfer-Encoding: chunked", f"Content-Length: {len(TRACK)}"), TRACK),
    ],
    ids=["chunk size not hex", "chunked and Content-Length"],
)
def test_malformed_framing_is_a_400_and_stores_nothing(door, acme, extra, body):
    lines = ["POST /v2/track HTTP/1.1", "Host: 127.0.0.1", f"Authorization: {acme.basic}", *extra]

    reply = send(door, "\n".join([*lines, "Connection: close"]) + "\n", body, close_write=True)

    assert reply is None or reply[0] == 400
    assert not AcceptedRequest.objects.exists()
