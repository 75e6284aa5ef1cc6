"""Differential, property-based: the two front doors are ONE contract, over the wire.

The WSGI door (gunicorn, 1 worker, `config.wsgi:application`) and the ASGI door (uvicorn on uvloop
and httptools, `config.asgi:application`) run as their production servers would, in production
mode (DEBUG off, ALLOWED_HOSTS=127.0.0.1,localhost), as subprocesses started once for the module
and sharing the test database. Hypothesis generates requests, valid and hostile (paths and long
targets, Host, duplicate headers, gzip, chunked, incomplete and odd framing, header sizes and
counts, body sizes, nesting depth, dates and clock skew, big numbers, NUL and lone surrogates,
duplicate keys, BOM, NaN, non-object bodies, huge ids, Segment batches), and each one goes, as raw
bytes on a socket of its own, to both doors. For every request:

- both doors answer the same status and the same body (JSON compared as parsed); the same
  security headers are held by a test of their own;
- an incomplete request (a body shorter than its Content-Length, a chunked body without its last
  chunk; the client shuts its write side) is never stored and never gets a 2xx; a request that
  gets no 2xx stores nothing;
- then the real drain runs in this process: no request is dropped as `apply_failed`, the store
  is empty, every identify, group and track the doors stored for the tenant is in the domain
  (users, accounts, events) and can be read back; the tenant's domain data is then emptied, so
  every example stands alone;
- the rules, tested apart so that a rule both doors break alike hides no difference between
  them: header values above 8 KiB get 431, traits nested deeper than 32 levels are refused (400,
  or the batch item is rejected), a message time outside 1970-01-01T00:00:00Z .. now + 24 h
  (after clock-skew correction with sentAt) is never promised, a chunked body is read as if it
  came with a Content-Length.

A failure's type names the check and the class of input (e.g. `StatusDiffersPath`), so Hypothesis
reports each pair as a distinct failure with its own minimal example. The explicit cases at the
end pin one example of each class of bug, for easy reading. DOORS_EXAMPLES_SCALE=3 (an
environment variable) multiplies the examples for a longer hunt.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import http.client
import json
import os
import signal
import socket
import string
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from django.apps import apps
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import DataError, connection, transaction
from django.db.models import Max
from django.test.utils import setup_databases
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from engagement.models import Account, Event, User
from engagement.services import product_create
from ingestion.models import AcceptedRequest, DroppedRequest, IngestionKey, SeenMessage
from ingestion.services.drain import accepted_requests_drain
from tests.ingestion.frontdoors import (
    database_url_of_tests,
    free_port,
    serve_in_subprocess,
    wait_for_http,
)

pytestmark = [pytest.mark.e2e]

KEY = "eds-differential-key-0123456789_abcdefghij"  # '-' and '_': never read as strict base64
UNKNOWN_KEY = "eds-differential-unknown-key"  # no product has it: accepted, then dropped
BASIC = f"Basic {KEY}"
BASIC64 = "Basic " + base64.b64encode(f"{KEY}:".encode()).decode()
SECURITY_HEADERS = (
    "x-content-type-options",
    "referrer-policy",
    "cross-origin-opener-policy",
    "x-frame-options",
)
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
MAX_TRAITS_DEPTH = 32
SURELY_TOO_DEEP = 40  # the rule says 32; 33-39 are left alone whichever way levels are counted
SURELY_TOO_LARGE_HEADER = 8 * 1024 + 300  # "above 8 KiB: 431", clear of any off-by-a-line
V2 = ("v2/identify", "v2/group", "v2/track")
V1 = ("v1/users", "v1/groups", "v1/events")
BATCH = ("v1/batch", "v1/import")
ENDPOINTS = (*V2, *V1, "segment", *BATCH)
SCALE = max(1, int(os.environ.get("DOORS_EXAMPLES_SCALE", "1")))


def now_ms() -> int:
    return int(time.time() * 1000)


# --- Requests as bytes on the wire -----------------------------------------------------------


class Req:
    """One request exactly as it goes on the wire, and what the rules say about it.

    `host`: the Host header ("{port}" becomes the door's port; None: no Host header).
    `chunks`: send the body chunked, in pieces of these sizes (the rest in one last piece).
    `cut`: send only this many bytes of the body (of the chunked stream, without its last
    chunk, when chunked), then shut the write side: an incomplete request.
    `refuse`: message index -> why it must not be promised (a 2xx for a call, a 202 that stores
    it as anything but a drop for /segment, an item not in `rejected` for a batch).
    """

    def __init__(
        self,
        endpoint: str,
        body: bytes,
        headers: tuple[tuple[str, str], ...] = (),
        *,
        path: str | None = None,
        host: str | None = "127.0.0.1:{port}",
        chunks: tuple[int, ...] | None = None,
        chunk_ext: bool = False,
        cut: int | None = None,
        refuse: dict[int, str] | None = None,
        header_too_large: bool = False,
        kind: str = "valid",
        what: str = "",
        framing: str = "auto",
    ) -> None:
        self.endpoint = endpoint
        self.body = body
        self.headers = tuple(headers)
        self.path = path if path is not None else f"/{endpoint}"
        self.host = host
        self.chunks = chunks
        self.chunk_ext = chunk_ext
        self.cut = cut
        self.refuse = dict(refuse or {})
        self.header_too_large = header_too_large
        self.kind = kind
        self.what = what
        self.framing = framing

    def replace(self, **changes) -> Req:
        values = {
            "endpoint": self.endpoint,
            "body": self.body,
            "headers": self.headers,
            "path": self.path,
            "host": self.host,
            "chunks": self.chunks,
            "chunk_ext": self.chunk_ext,
            "cut": self.cut,
            "refuse": self.refuse,
            "header_too_large": self.header_too_large,
            "kind": self.kind,
            "what": self.what,
            "framing": self.framing,
        }
        values.update(changes)
        endpoint = values.pop("endpoint")
        body = values.pop("body")
        return Req(endpoint, body, **values)

    @property
    def incomplete(self) -> bool:
        return self.cut is not None

    def _pieces(self) -> list[bytes]:
        pieces, rest = [], self.body
        for size in self.chunks or ():
            if not rest:
                break
            pieces.append(rest[: max(1, size)])
            rest = rest[max(1, size) :]
        if rest:
            pieces.append(rest)
        return pieces

    def chunked_stream(self) -> bytes:
        """The chunked body without its last (0) chunk and trailer."""
        ext = b";note=1" if self.chunk_ext else b""
        return b"".join(b"%x%s\r\n%s\r\n" % (len(p), ext, p) for p in self._pieces())

    def wire(self, port: int) -> bytes:
        version = "HTTP/1.0" if self.framing == "http/1.0" else "HTTP/1.1"
        lines = [f"POST {self.path} {version}"]
        if self.host is not None:
            lines.append(f"Host: {self.host.replace('{port}', str(port))}")
        lines.extend(f"{name}: {value}" for name, value in self.headers)
        framed = FRAMINGS.get(self.framing)
        if framed is not None:
            framing_lines, payload = framed(self)
            lines.extend(framing_lines)
        elif self.chunks is None:
            lines.append(f"Content-Length: {len(self.body)}")
            payload = self.body if self.cut is None else self.body[: self.cut]
        else:
            lines.append("Transfer-Encoding: chunked")
            stream = self.chunked_stream()
            payload = stream + b"0\r\n\r\n" if self.cut is None else stream[: self.cut]
        lines.append("Connection: close")
        return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + payload

    def __repr__(self) -> str:
        parts = [repr(f"{self.kind}: {self.what}" if self.what else self.kind)]
        parts.append(f"POST {self.path!r}")
        if self.host != "127.0.0.1:{port}":
            parts.append(f"host={self.host!r}")
        headers = ", ".join(f"({name!r}, {_short(value)})" for name, value in self.headers)
        parts.append(f"headers=[{headers}]")
        parts.append(f"body={_short(self.body)}")
        if self.chunks is not None:
            parts.append(f"chunks={self.chunks!r}" + (" with extensions" if self.chunk_ext else ""))
        if self.cut is not None:
            parts.append(f"cut after {self.cut} bytes, then SHUT_WR")
        if self.framing != "auto":
            parts.append(f"framing={self.framing!r}")
        if self.refuse:
            parts.append(f"must refuse={self.refuse!r}")
        return "Req(" + ", ".join(parts) + ")"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


# Request framings beyond Content-Length and chunked: (framing header lines, payload).
FRAMINGS = {
    "none": lambda req: ([], b""),
    "bad length": lambda req: (["Content-Length: 1x"], req.body),
    "two lengths": lambda req: ([f"Content-Length: {len(req.body)}"] * 2, req.body),
    "length and chunked": lambda req: (
        [f"Content-Length: {len(req.body)}", "Transfer-Encoding: chunked"],
        _chunk(req.body) + b"0\r\n\r\n",
    ),
    "bad chunk size": lambda req: (
        ["Transfer-Encoding: chunked"],
        b"zz\r\n" + req.body + b"\r\n0\r\n\r\n",
    ),
    "chunked with trailer": lambda req: (
        ["Transfer-Encoding: chunked"],
        _chunk(req.body) + b"0\r\nX-Trailer: 1\r\n\r\n",
    ),
    "length one short": lambda req: ([f"Content-Length: {max(0, len(req.body) - 1)}"], req.body),
    "http/1.0": lambda req: ([f"Content-Length: {len(req.body)}"], req.body),
}


def _short(value: bytes | str, keep: int = 240) -> str:
    if len(value) <= keep:
        return repr(value)
    return f"{value[:keep]!r}+<{len(value) - keep} more of {len(value)}>"


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]

    def parsed(self):
        """The body as JSON when it is JSON, else its bytes."""
        try:
            return ("json", json.loads(self.body))
        except ValueError:
            return ("bytes", self.body)

    def __repr__(self) -> str:
        return f"{self.status} {_short(self.body, 400)}"


def exchange(port: int, req: Req, timeout: float = 10.0) -> Answer | None:
    """Send the request's bytes on a new connection; the answer, or None when the server closed
    the connection without one."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    with sock:
        with contextlib.suppress(OSError):  # a server may answer (and close) before reading all
            sock.sendall(req.wire(port))
        if req.incomplete:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
        response = http.client.HTTPResponse(sock, method="POST")
        try:
            response.begin()
            body = response.read()
        except (http.client.HTTPException, OSError):
            return None
        return Answer(
            response.status, [(name.lower(), value) for name, value in response.getheaders()], body
        )


# --- JSON written by hand: duplicate keys, literals, any depth ----------------------------------


class Lit:
    """A JSON fragment written as is (NaN, 1e400, a nesting 900 deep, invalid UTF-8)."""

    def __init__(self, text: str | bytes) -> None:
        self.text = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text

    def __repr__(self) -> str:
        return f"Lit({_short(self.text, 80)})"


class Pairs:
    """A JSON object that may carry a key more than once."""

    def __init__(self, pairs) -> None:
        self.pairs = tuple(pairs)

    def __repr__(self) -> str:
        return f"Pairs({list(self.pairs)!r})"


def dumps(value, *, ascii_only: bool = True) -> bytes:
    out: list[bytes] = []
    _write(value, out, ascii_only)
    return b"".join(out)


def _write(value, out: list[bytes], ascii_only: bool) -> None:
    if isinstance(value, Lit):
        out.append(value.text)
    elif isinstance(value, dict | Pairs):
        items = value.items() if isinstance(value, dict) else value.pairs
        out.append(b"{")
        for n, (key, item) in enumerate(items):
            if n:
                out.append(b",")
            _write(key, out, ascii_only)
            out.append(b":")
            _write(item, out, ascii_only)
        out.append(b"}")
    elif isinstance(value, list | tuple):
        out.append(b"[")
        for n, item in enumerate(value):
            if n:
                out.append(b",")
            _write(item, out, ascii_only)
        out.append(b"]")
    else:
        # ensure_ascii writes a lone surrogate as its \\udXXX escape; without it, as the invalid
        # UTF-8 bytes a careless client would send.
        out.append(json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))


def nested(depth: int, shape: str = "object") -> Lit:
    """A traits value `depth` containers deep, the traits object itself the first."""
    inner = depth - 1
    if shape == "object":
        return Lit('{"a":' * inner + "{}" + "}" * inner)
    if shape == "list":
        return Lit('{"a":' + "[" * inner + "]" * inner + "}")
    half = inner // 2
    return Lit('{"a":' + '{"b":[' * half + "1" + "]}" * half + "}")


# --- Strategies: the parts of a message ------------------------------------------------------


def valid_or(valid: st.SearchStrategy, hostile: st.SearchStrategy) -> st.SearchStrategy:
    """Half valid, half hostile; valid first, so shrinking heads for the valid side."""
    return st.one_of(valid, hostile)


SAFE_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=8
)
VALID_IDS = st.one_of(
    st.text(alphabet=string.ascii_lowercase + string.digits + "_", min_size=1, max_size=10),
    st.sampled_from(["usr_ann", "acct_acme", " padded ", "ü-😀"]),
    st.sampled_from([("x", 255), ("😀", 255)]).map(lambda c: c[0] * c[1]),
)
HOSTILE_IDS = st.one_of(
    st.sampled_from(["", "   ", "u\x00x", "\x00", "\ud800", "a\udfffb", "\udc00\ud800"]),
    st.just(256).map(lambda n: "x" * n),
    st.sampled_from([5, 10**30, 1.5, True, [], {}, [["usr"]]]),
    st.text(max_size=4),
)
HUGE_IDS = st.sampled_from(
    [("x", 255), ("😀", 255), ("x", 256), ("😀", 256), ("x", 1000), ("x", 20_000), (" u", 300)]
).map(lambda c: c[0] * c[1])
VALID_EVENTS = st.one_of(
    st.sampled_from(["Login", "Report_Created", "Viewed Dashboard", "ü event"]),
    st.just(255).map(lambda n: "e" * n),
    st.text(alphabet=string.ascii_letters, min_size=1, max_size=10),
)
HOSTILE_STRINGS = st.sampled_from(
    [
        "x\x00y",
        "\x00",
        "\ud800",
        "a\udfff",
        "\udc00\ud800",
        "\ud83d\ude00",  # a valid pair, written as escapes
        "\u2028\u2029",
        "\uffff\ufffe",
        "\x7f\x1b[0m",
        "é" * 300,
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-1000, max_value=10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    SAFE_TEXT,
)
BIG_NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30, -(10**40), 10**100]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            Lit("1e400"),
            Lit("-1e400"),
            Lit("1E+308"),
            Lit("1.7976931348623157e308"),
            Lit("5e-324"),
            Lit("1e-400"),
            Lit("-0.0"),
            Lit("-0"),
            Lit("123456789012345678901234567890.5"),
            Lit("1" * 400),
            Lit("1" * 5000),
            Lit("0.1e99999"),
        ]
    ),
)
NON_FINITE = st.sampled_from([Lit("NaN"), Lit("Infinity"), Lit("-Infinity"), Lit("nan")])
TRAIT_KEYS = st.one_of(st.sampled_from(["plan", "seats", "name", "email", "score"]), SAFE_TEXT)


def traits_of(values: st.SearchStrategy, keys: st.SearchStrategy = TRAIT_KEYS):
    """(traits, depth): depth 1 for a flat object."""
    return st.dictionaries(keys, values, max_size=4).map(lambda t: (t, 1))


VALID_TRAITS = traits_of(
    st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=5)
)


@st.composite
def deep_traits(draw):
    depth = draw(
        st.one_of(
            st.integers(min_value=1, max_value=30),
            st.sampled_from([31, 32, 33, 34, 40, 41, 64, 100, 255, 256, 300, 600, 900, 990, 1100]),
        )
    )
    shape = draw(st.sampled_from(["object", "list", "mixed"]))
    return nested(depth, shape), depth


HOSTILE_STRING_TRAITS = st.one_of(
    traits_of(HOSTILE_STRINGS),
    traits_of(SCALARS, keys=HOSTILE_STRINGS),
    st.tuples(st.fixed_dictionaries({"nested": st.lists(HOSTILE_STRINGS, max_size=2)}), st.just(2)),
)
NUMBER_TRAITS = st.one_of(
    traits_of(BIG_NUMBERS),
    st.tuples(st.fixed_dictionaries({"n": st.lists(BIG_NUMBERS, max_size=3)}), st.just(2)),
)


@dataclass(frozen=True)
class Stamp:
    """A time as sent, and the Unix ms it stands for (None: it stands for no time)."""

    value: object
    ms: int | None


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


@st.composite
def recent_stamps(draw):
    """A time near now, as ISO 8601 or Unix ms: what SDKs send."""
    ms = now_ms() - draw(st.integers(min_value=0, max_value=6 * HOUR_MS))
    return draw(st.sampled_from([Stamp(iso(ms), ms), Stamp(ms, ms)]))


def _relative(offsets: list[int]) -> st.SearchStrategy:
    """Times at these offsets from now, as ISO 8601, Unix ms or Unix ms in a string."""

    @st.composite
    def build(draw):
        ms = now_ms() + draw(st.sampled_from(offsets))
        form = draw(st.sampled_from(["iso", "ms", "digits"]))
        if form == "iso" and -62_135_596_800_000 < ms < 253_402_300_799_000:
            return Stamp(iso(ms), ms)
        return Stamp(str(ms), ms) if form == "digits" else Stamp(ms, ms)

    return build()


YEAR_MS = 365 * DAY_MS
JAN_2026 = 1_767_225_600_000
# Each family in equal measure: in range, ahead, before 1970, odd forms, out of any range,
# not a time at all.
ANY_STAMPS = st.one_of(
    recent_stamps(),
    _relative([25 * HOUR_MS, 30 * DAY_MS, 100 * YEAR_MS, 7000 * YEAR_MS]),
    st.sampled_from(
        [
            Stamp("1969-12-31T23:59:59Z", -1000),
            Stamp("1969-12-31T23:59:59.999Z", -1),
            Stamp(-1, -1),
            Stamp("1900-06-01T12:00:00+02:00", -2_195_906_400_000),
            Stamp("0001-01-01T00:00:00Z", -62_135_596_800_000),
            Stamp(-62_135_596_800_000, -62_135_596_800_000),
            Stamp("1970-01-01T00:00:00Z", 0),
            Stamp(0, 0),
        ]
    ),
    _relative([-50 * YEAR_MS, -1000 * YEAR_MS, -3000 * YEAR_MS]),
    st.sampled_from(
        [
            Stamp("2026-01-01", JAN_2026),
            Stamp("2026-01-01T00:00:00", JAN_2026),
            Stamp("2026-01-01t00:00:00z", JAN_2026),
            Stamp("2026-01-01T00:00:00+14:00", JAN_2026 - 14 * HOUR_MS),
            Stamp(" 2026-01-01T00:00:00Z ", JAN_2026),
            Stamp(1.7e12, 1_700_000_000_000),
            Stamp(1_700_000_000, 1_700_000_000),  # seconds, read as ms: January 1970
        ]
    ),
    st.sampled_from(
        [
            Stamp("9999-12-31T23:59:59Z", 253_402_300_799_000),
            Stamp(-62_135_596_800_001, -62_135_596_800_001),
            Stamp("-62135596800001", -62_135_596_800_001),
            Stamp(2**53, 2**53),
            Stamp(-(2**53), -(2**53)),
            Stamp(10**15, 10**15),
            Stamp(10**20, 10**20),
            Stamp(1e300, 10**300),
            Stamp(-1e300, -(10**300)),
        ]
    ),
    st.sampled_from(
        [
            Stamp("yesterday", None),
            Stamp("", None),
            Stamp("2026-13-01T00:00:00Z", None),
            Stamp("NaN", None),
            Stamp(True, None),
            Stamp({}, None),
            Stamp([], None),
        ]
    ),
)
# A client's sentAt: its clock right, a little off, far off either way, or nonsense.
ANY_SENT_ATS = st.one_of(
    _relative([0]),
    _relative([-2 * HOUR_MS, 3 * HOUR_MS, 30 * YEAR_MS, 5000 * YEAR_MS, -2000 * YEAR_MS]),
    st.sampled_from(
        [
            Stamp("9999-01-01T00:00:00Z", 253_370_764_800_000),
            Stamp("0001-01-01T00:00:00Z", -62_135_596_800_000),
            Stamp("1900-01-01T00:00:00Z", -2_208_988_800_000),
            Stamp(10**15, 10**15),
            Stamp("soon", None),
        ]
    ),
)


@dataclass(frozen=True)
class Parts:
    """Where each part of a message comes from; a class of hostile input swaps one or two."""

    ids: st.SearchStrategy = VALID_IDS
    events: st.SearchStrategy = VALID_EVENTS
    traits: st.SearchStrategy = VALID_TRAITS
    stamps: st.SearchStrategy = st.none() | recent_stamps()
    sent_ats: st.SearchStrategy = st.none() | recent_stamps()
    extras: st.SearchStrategy = st.just({})  # more fields (properties, context...), never stored
    always_traits: bool = False  # identify and group messages always carry traits


VALID = Parts()
UNSURE = object()  # a time the doors' own clock puts on one side of a rule or the other


def _time_rule(ms, now: int, *, corrected: bool) -> str | None:
    """Why a message time must be refused, or None. Near a boundary that moves with the clock
    (24 h ahead; 1970 too once corrected with the clock) nothing is said: the doors read the
    clock a little later than the generator."""
    if ms is None or ms is UNSURE:
        return None
    if abs(ms - (now + DAY_MS)) < 120_000 or (corrected and abs(ms) < 120_000):
        return None
    if ms < 0:
        return f"time {ms} ms is before 1970-01-01T00:00:00Z"
    if ms > now + DAY_MS:
        return f"time {ms} ms is more than 24 h ahead"
    return None


def segment_time(
    stamp: Stamp | None,
    sent_at: Stamp | None,
    batch_sent_at: Stamp | None,
    received_at: bool,
    now: int,
):
    """(the message time after clock-skew correction as docs/segment.md says, corrected?);
    None for no time or one that is not a time, UNSURE near the 5 s skew threshold."""
    if stamp is None or stamp.ms is None:
        return None, False
    sent = sent_at if sent_at is not None else batch_sent_at
    if sent is None or received_at:
        return stamp.ms, False
    if sent.ms is None:
        return None, False
    gap = abs(now - sent.ms)
    if 3_000 < gap < 7_000:
        return UNSURE, False
    if gap > 5_000:
        return now - (sent.ms - stamp.ms), True
    return stamp.ms, False


def refusal(kind: str, depth: int, time_ms, now: int, *, corrected: bool = False) -> str | None:
    reasons = []
    if kind in ("identify", "group") and depth >= SURELY_TOO_DEEP:
        reasons.append(f"traits nested {depth} levels deep (at most {MAX_TRAITS_DEPTH})")
    if rule := _time_rule(time_ms, now, corrected=corrected):
        reasons.append(rule)
    return "; ".join(reasons) or None


# --- Strategies: messages and requests -------------------------------------------------------


@st.composite
def call_message(draw, endpoint: str, parts: Parts):
    """One v1 or v2 call: (body object, why it must be refused or None)."""
    names = (
        {"userId": "user_id", "groupId": "group_id"}
        if endpoint in V1
        else {"userId": "userId", "groupId": "groupId"}
    )
    kind = {"identify": "identify", "users": "identify", "group": "group", "groups": "group"}.get(
        endpoint.split("/")[1], "track"
    )
    body: dict = {}
    depth = 0
    if kind == "group":
        body[names["groupId"]] = draw(parts.ids)
        if draw(st.booleans()):
            body[names["userId"]] = draw(parts.ids)
    else:
        body[names["userId"]] = draw(parts.ids)
    if kind == "track":
        body["event"] = draw(parts.events)
        if draw(st.booleans()):
            body["context"] = {"groupId": draw(parts.ids)}
    elif parts.always_traits or draw(st.booleans()):
        traits, depth = draw(parts.traits)
        body["traits"] = traits
    if kind == "identify" and draw(st.booleans()):
        body[names["groupId"]] = draw(parts.ids)
    stamp = draw(parts.stamps)
    if stamp is not None:
        body["timestamp"] = stamp.value
    body.update(draw(parts.extras))
    if endpoint in V1:
        body["api_key"] = draw(st.sampled_from([KEY, KEY, KEY, UNKNOWN_KEY, f" {KEY} "]))
    now = now_ms()
    return body, refusal(kind, depth, stamp.ms if stamp else None, now)


SEGMENT_TYPES = st.sampled_from(
    ["track", "identify", "group", "page", "screen", "track", "identify", "alias", "Track"]
)


@st.composite
def segment_message(draw, parts: Parts, batch_sent_at: Stamp | None = None):
    """One Segment-spec message: (object, why it must be refused or None)."""
    kind = draw(SEGMENT_TYPES)
    message: dict = {"type": kind}
    depth = 0
    applied_kind = kind.lower()
    if applied_kind == "group":
        message["groupId"] = draw(parts.ids)
        if draw(st.booleans()):
            message["userId"] = draw(parts.ids)
    else:
        message["userId"] = draw(parts.ids)
    if applied_kind == "track":
        message["event"] = draw(parts.events)
    if applied_kind in ("page", "screen") and draw(st.booleans()):
        message["name"] = draw(parts.events)
    if applied_kind in ("track", "page", "screen") and draw(st.booleans()):
        message["context"] = {"groupId": draw(parts.ids)}
    if applied_kind in ("identify", "group") and (parts.always_traits or draw(st.booleans())):
        traits, depth = draw(parts.traits)
        if applied_kind == "identify" and draw(st.booleans()):
            message["context"] = {"traits": traits}  # RudderStack's place for them
        else:
            message["traits"] = traits
    if draw(st.booleans()):
        message["messageId"] = draw(st.one_of(st.uuids().map(str), parts.ids))
    stamp = draw(parts.stamps)
    if stamp is not None:
        message["timestamp"] = stamp.value
    sent_at = draw(parts.sent_ats)
    if sent_at is not None:
        message["sentAt"] = sent_at.value
    received_at = stamp is not None and draw(st.integers(min_value=0, max_value=5)) == 0
    if received_at:
        message["receivedAt"] = iso(now_ms())
    message.update(draw(parts.extras))
    now = now_ms()
    time_ms, corrected = segment_time(stamp, sent_at, batch_sent_at, received_at, now)
    if applied_kind not in ("track", "identify", "group", "page", "screen"):
        return message, None
    return message, refusal(applied_kind, depth, time_ms, now, corrected=corrected)


@st.composite
def request_objects(draw, parts: Parts = VALID, endpoints: tuple[str, ...] = ENDPOINTS):
    """(endpoint, body object, headers, refuse) of one request, with its key."""
    endpoint = draw(st.sampled_from(endpoints))
    headers: list[tuple[str, str]] = [("Content-Type", "application/json")]
    refuse: dict[int, str] = {}
    header_auth = draw(
        st.sampled_from([BASIC, BASIC64, BASIC, BASIC64, f"basic {KEY}", f"Basic {UNKNOWN_KEY}"])
    )
    if endpoint in (*V2, *V1):
        body, why = draw(call_message(endpoint, parts))
        if why:
            refuse[0] = why
        if endpoint in V2 or draw(st.booleans()):  # v1 ignores the header
            headers.append(("Authorization", header_auth))
        return endpoint, body, tuple(headers), refuse
    in_body = draw(st.integers(min_value=0, max_value=4)) == 0  # writeKey in the body
    if endpoint == "segment":
        body, why = draw(segment_message(parts))
        if why:
            refuse[0] = why
    else:
        batch_sent_at = draw(parts.sent_ats)
        items = []
        for index in range(draw(st.integers(min_value=0, max_value=4))):
            item, why = draw(segment_message(parts, batch_sent_at))
            items.append(item)
            if why:
                refuse[index] = why
        body = {"batch": items}
        if batch_sent_at is not None:
            body["sentAt"] = batch_sent_at.value
        if draw(st.booleans()):
            body["context"] = {"library": {"name": "analytics-python", "version": "2.4.0"}}
    if in_body:
        body["writeKey"] = KEY
    else:
        headers.append(("Authorization", header_auth))
    return endpoint, body, tuple(headers), refuse


def plain(objects, *, ascii_only: bool = True, kind: str = "valid", what: str = "") -> Req:
    endpoint, body, headers, refuse = objects
    raw = dumps(body, ascii_only=ascii_only)
    return Req(endpoint, raw, headers, refuse=refuse, kind=kind, what=what)


def valid_requests(parts: Parts = VALID, endpoints: tuple[str, ...] = ENDPOINTS):
    return request_objects(parts, endpoints).map(plain)


# --- The classes of hostile input ------------------------------------------------------------

PATH_FORMS = (
    "/{e}",
    "//{e}",
    "/{e}/",
    "/{e}//",
    "///{e}",
    "//{e}/",
    "/{e}?source=sdk",
    "/{e}/?source=sdk",
    "/{e}%2F",
    "/{e}/.",
    "/./{e}",
    "/{E}",
    "/{e}?q={q4000}",
    "/{e}?q={q5000}",
    "/{e}?q={q9000}",
    "/{e}/{q5000}",
)


def _between(draw, low: int, high: int) -> int:
    """A position from `low` to `high` drawn as a fraction of the span, so the draws do not
    depend on lengths that vary from run to run (a body holds the current time)."""
    return low + draw(st.integers(min_value=0, max_value=1000)) * (high - low) // 1000


@st.composite
def path_variants(draw):
    req = draw(valid_requests())
    form = draw(st.sampled_from(PATH_FORMS))
    path = form.format(
        e=req.endpoint,
        E=req.endpoint.upper(),
        q4000="x" * 4000,
        q5000="x" * 5000,
        q9000="x" * 9000,
    )
    return req.replace(path=path, kind="path", what=form)


HOSTS = (
    "127.0.0.1:{port}",
    "localhost:{port}",
    "127.0.0.1",
    "localhost",
    "LOCALHOST:{port}",
    "evil.example",
    "evil.example:{port}",
    "127.0.0.1.evil.example",
    "localhost.:{port}",
    "",
    None,
    "127.0.0.1:{port}@evil.example",
    "[::1]:{port}",
    "127.0.0.1:99999",
    "127.0.0.1:{port}, evil.example",
)


@st.composite
def host_variants(draw):
    req = draw(valid_requests())
    return req.replace(host=draw(st.sampled_from(HOSTS)), kind="host")


AUTH_VALUES = st.sampled_from(
    [
        BASIC,
        BASIC64,
        "Bearer abc",
        f"Basic {UNKNOWN_KEY}",
        "",
        "Basic",
        f"Basic {KEY}, {BASIC}",
        "Basic cl\xe9",
        f"  {BASIC}  ",
    ]
)


@st.composite
def duplicate_headers(draw):
    endpoint, body, headers, refuse = draw(request_objects(endpoints=(*V2, "segment", *BATCH)))
    raw = dumps(body)
    kept = [(n, v) for n, v in headers if n != "Authorization"]
    which = draw(st.sampled_from(["authorization", "content-encoding", "host", "content-type"]))
    host = "127.0.0.1:{port}"
    if which == "authorization":
        values = draw(st.lists(AUTH_VALUES, min_size=2, max_size=3))
        kept.extend(("Authorization", value) for value in values)
    else:
        kept.append(("Authorization", draw(st.sampled_from([BASIC, BASIC64]))))
    if which == "content-encoding":
        encodings = draw(
            st.lists(st.sampled_from(["gzip", "identity", "br", "x-gzip"]), min_size=2, max_size=3)
        )
        kept.extend(("Content-Encoding", value) for value in encodings)
        times = draw(st.integers(min_value=0, max_value=2))
        for _ in range(times):
            raw = gzip.compress(raw, mtime=0)
    if which == "host":
        kept.append(("Host", draw(st.sampled_from(["evil.example", "127.0.0.1", "localhost"]))))
    if which == "content-type":
        kept.append(("Content-Type", draw(st.sampled_from(["text/plain", "application/json"]))))
    return Req(
        endpoint,
        raw,
        tuple(kept),
        host=host,
        refuse=refuse,
        kind="duplicate headers",
        what=f"duplicate {which}",
    )


@st.composite
def gzip_bodies(draw):
    endpoint, body, headers, refuse = draw(request_objects())
    raw = dumps(body)
    form = draw(
        st.sampled_from(
            [
                "gzip",
                "truncated",
                "bomb",
                "two members",
                "twice",
                "garbage after",
                "not gzip",
                "gzip of not json",
                "empty gzip",
            ]
        )
    )
    if form == "gzip":
        encoded = gzip.compress(raw, mtime=0)
    elif form == "truncated":
        whole = gzip.compress(raw, mtime=0)
        encoded = whole[: _between(draw, 0, len(whole) - 1)]
    elif form == "bomb":
        size = draw(st.sampled_from([20_000, 33_000, 100_000, 600_000, 5_000_000]))
        encoded = gzip.compress(raw[:-1] + b" " * size + raw[-1:], mtime=0)
    elif form == "two members":
        half = _between(draw, 0, len(raw))
        encoded = gzip.compress(raw[:half], mtime=0) + gzip.compress(raw[half:], mtime=0)
    elif form == "twice":
        encoded = gzip.compress(gzip.compress(raw, mtime=0), mtime=0)
    elif form == "garbage after":
        encoded = gzip.compress(raw, mtime=0) + draw(st.sampled_from([b"x", b"\x00" * 8, b"\n"]))
    elif form == "not gzip":
        encoded = raw
    elif form == "gzip of not json":
        encoded = gzip.compress(b"{not json" + raw, mtime=0)
    else:
        encoded = gzip.compress(b"", mtime=0)
    encoding = draw(
        st.sampled_from(
            [
                "gzip",
                "gzip",
                "x-gzip",
                "GZIP",
                " gzip ",
                "identity",
                "br",
                "deflate",
                "gzip, identity",
                "",
            ]
        )
    )
    return Req(
        endpoint,
        encoded,
        (*headers, ("Content-Encoding", encoding)),
        refuse=refuse,
        kind="gzip",
        what=form,
    )


@st.composite
def chunked_bodies(draw):
    req = draw(st.one_of(valid_requests(), gzip_bodies()))
    sizes = draw(st.lists(st.integers(min_value=1, max_value=4096), min_size=0, max_size=5))
    return req.replace(chunks=tuple(sizes), chunk_ext=draw(st.booleans()), kind="chunked")


@st.composite
def truncated_bodies(draw):
    endpoint, body, headers, refuse = draw(request_objects())
    raw = dumps(body)
    # Padding after the JSON: a prefix that is itself a whole JSON object is the dangerous cut.
    padded = raw + b" " * draw(st.integers(min_value=0, max_value=64))
    chunked = draw(st.booleans())
    req = Req(endpoint, padded, headers, kind="incomplete")
    if chunked:
        sizes = tuple(draw(st.lists(st.integers(min_value=1, max_value=64), max_size=4)))
        req = req.replace(chunks=sizes)
        stream = req.chunked_stream()
        cut = len(stream) if draw(st.booleans()) else _between(draw, 0, len(stream))
        return req.replace(cut=cut, what="chunked, no last chunk")
    if len(padded) > len(raw) and draw(st.booleans()):
        cut = _between(draw, len(raw), len(padded) - 1)  # the JSON whole, some padding missing
    else:
        cut = _between(draw, 0, len(padded) - 1)
    return req.replace(body=padded, cut=cut, what="shorter than its Content-Length")


@st.composite
def large_headers(draw):
    req = draw(valid_requests())
    if draw(st.integers(min_value=0, max_value=4)) == 0:  # many small header fields instead
        count = draw(st.sampled_from([50, 97, 101, 150, 199, 201, 300]))
        extra = tuple((f"X-Field-{n}", "v") for n in range(count))
        return req.replace(
            headers=(*req.headers, *extra), kind="large header", what=f"{count} more fields"
        )
    name = draw(st.sampled_from(["X-Padding", "User-Agent", "Cookie", "Referer", "Authorization"]))
    size = draw(
        st.one_of(
            st.sampled_from([100, 4096, 8000, 8500, 9000, 16_385, 65_536, 100_000]),
            st.integers(min_value=1, max_value=70_000),
        )
    )
    if name == "Authorization":
        value = "Basic " + "k" * size
        headers = tuple((n, v) for n, v in req.headers if n != "Authorization")
    else:
        value = ("a=" if name == "Cookie" else "") + "x" * size
        headers = req.headers
    return req.replace(
        headers=(*headers, (name, value)),
        header_too_large=len(value) >= SURELY_TOO_LARGE_HEADER,
        kind="large header",
        what=f"{name} of {len(value)} bytes",
    )


@st.composite
def framings(draw):
    req = draw(valid_requests())
    framing = draw(st.sampled_from(sorted(FRAMINGS)))
    return req.replace(framing=framing, kind="framing", what=framing)


@st.composite
def sized_bodies(draw):
    """Bodies padded (with spaces inside the JSON) to sizes around their endpoint's limit."""
    endpoint, body, headers, refuse = draw(request_objects())
    raw = dumps(body)
    limit = 512 * 1024 if endpoint in BATCH else 32 * 1024
    size = draw(st.sampled_from([limit - 1, limit, limit + 1, limit * 2]))
    padded = raw[:-1] + b" " * max(0, size - len(raw)) + raw[-1:]
    req = Req(endpoint, padded, headers, refuse=refuse, kind="size", what=f"{len(padded)} bytes")
    if draw(st.booleans()):
        req = req.replace(
            body=gzip.compress(padded, mtime=0),
            headers=(*headers, ("Content-Encoding", "gzip")),
            what=f"{len(padded)} bytes gzipped",
        )
    if draw(st.booleans()):
        req = req.replace(chunks=(draw(st.sampled_from([1000, 16_384, 65_536])),))
    return req


def deep_requests():
    parts = Parts(traits=deep_traits(), always_traits=True)
    kinds = ("v2/identify", "v2/group", "v1/users", "v1/groups", "segment", *BATCH)
    return valid_requests(parts, kinds).map(lambda r: r.replace(kind="depth"))


FAR_SENT_ATS = st.one_of(
    _relative([30 * YEAR_MS, 5000 * YEAR_MS, -30 * YEAR_MS, -2000 * YEAR_MS]),
    st.sampled_from(
        [
            Stamp("9999-01-01T00:00:00Z", 253_370_764_800_000),
            Stamp("0001-01-01T00:00:00Z", -62_135_596_800_000),
        ]
    ),
)


def timestamp_requests():
    """Times of every family on every endpoint; and, as often, Segment messages whose sentAt is
    far off, where clock-skew correction carries a sensible time out of range."""
    parts = Parts(stamps=st.none() | ANY_STAMPS, sent_ats=st.none() | ANY_SENT_ATS)
    endpoints = ("v2/track", "v2/identify", "v1/events", "segment", "segment", *BATCH, *BATCH)
    skewed = Parts(stamps=recent_stamps() | ANY_STAMPS, sent_ats=FAR_SENT_ATS)
    return st.one_of(
        valid_requests(parts, endpoints), valid_requests(skewed, ("segment", *BATCH))
    ).map(lambda r: r.replace(kind="time"))


def number_requests():
    parts = Parts(traits=valid_or(VALID_TRAITS, NUMBER_TRAITS), stamps=st.none() | recent_stamps())
    kinds = ("v2/identify", "v2/group", "v1/users", "segment", *BATCH)
    return valid_requests(parts, kinds).map(lambda r: r.replace(kind="numbers"))


@st.composite
def string_requests(draw):
    parts = Parts(
        ids=valid_or(VALID_IDS, HOSTILE_STRINGS),
        events=valid_or(VALID_EVENTS, HOSTILE_STRINGS),
        traits=valid_or(VALID_TRAITS, HOSTILE_STRING_TRAITS),
        extras=st.one_of(
            st.just({}),
            st.fixed_dictionaries({"properties": st.dictionaries(SAFE_TEXT, HOSTILE_STRINGS)}),
            st.fixed_dictionaries({"anonymousId": HOSTILE_STRINGS}),
        ),
    )
    objects = draw(request_objects(parts))
    ascii_only = draw(st.booleans())
    return plain(objects, ascii_only=ascii_only, kind="strings", what="" if ascii_only else "raw")


@st.composite
def json_oddities(draw):
    endpoint, body, headers, refuse = draw(request_objects())
    form = draw(
        st.sampled_from(
            [
                "duplicate key",
                "duplicate trait",
                "bom",
                "non-finite",
                "not an object",
                "trailing",
                "utf-16",
                "comment",
                "big exponent",
            ]
        )
    )
    raw: bytes
    if form == "duplicate key":
        key = draw(st.sampled_from(sorted(body)))
        other = draw(st.one_of(VALID_IDS, HOSTILE_IDS, st.just(KEY)))
        pairs = list(body.items())
        pairs.insert(_between(draw, 0, len(pairs)), (key, other))
        raw = dumps(Pairs(pairs))
        refuse = {}  # which of the two values counts is not for this suite to say
    elif form == "duplicate trait":
        raw = dumps(Pairs([*body.items(), ("traits", Pairs([("plan", "a"), ("plan", 10**30)]))]))
    elif form == "bom":
        raw = b"\xef\xbb\xbf" + dumps(body)
    elif form == "non-finite":
        where = draw(st.sampled_from(["traits", "properties", "timestamp", "sentAt"]))
        value = draw(NON_FINITE)
        raw = dumps({**body, where: {"x": value} if where != "timestamp" else value})
    elif form == "not an object":
        raw = draw(
            st.sampled_from([b"[]", b"[{}]", b'"s"', b"1", b"null", b"true", b"", b"   ", b"\n"])
            | st.just(dumps([body]))
        )
        refuse = {}
    elif form == "trailing":
        raw = dumps(body) + draw(st.sampled_from([b"x", b",", b"}", b"\x00", b" \n", b"{}"]))
    elif form == "utf-16":
        raw = (
            dumps(body, ascii_only=True)
            .decode("ascii")
            .encode(draw(st.sampled_from(["utf-16", "utf-16-le", "utf-32"])))
        )
    elif form == "comment":
        raw = b"/* c */" + dumps(body)
    else:
        raw = dumps({**body, "properties": {"x": Lit("1e999999999")}})
    return Req(endpoint, raw, headers, refuse=refuse, kind="json", what=form)


def huge_id_requests():
    parts = Parts(ids=valid_or(VALID_IDS, HUGE_IDS), events=valid_or(VALID_EVENTS, HUGE_IDS))
    return valid_requests(parts).map(lambda r: r.replace(kind="huge ids"))


def segment_batches():
    parts = Parts(
        ids=valid_or(VALID_IDS, VALID_IDS | HOSTILE_IDS),
        stamps=st.none() | recent_stamps(),
        sent_ats=st.none() | recent_stamps(),
    )
    return valid_requests(parts, BATCH).map(lambda r: r.replace(kind="batch"))


ANY_REQUEST = st.one_of(
    valid_requests(),
    segment_batches(),
    path_variants(),
    host_variants(),
    duplicate_headers(),
    gzip_bodies(),
    chunked_bodies(),
    truncated_bodies(),
    large_headers(),
    deep_requests(),
    timestamp_requests(),
    number_requests(),
    string_requests(),
    json_oddities(),
    huge_id_requests(),
    framings(),
    sized_bodies(),
)


# --- The servers -----------------------------------------------------------------------------


@dataclass
class Door:
    name: str
    port: int
    process: object


@dataclass
class Doors:
    wsgi: Door
    asgi: Door
    product_id: int
    digest: str  # of KEY, as the store keeps it

    @property
    def both(self) -> tuple[Door, Door]:
        return (self.wsgi, self.asgi)


def _flush_database() -> None:
    """Leave the database as a transactional test does: empty."""
    call_command("flush", verbosity=0, interactive=False, database="default")


@pytest.fixture(scope="module")
def doors(django_db_setup, django_db_blocker, tmp_path_factory):
    with django_db_blocker.unblock():
        if not connection.settings_dict["NAME"].startswith("test_"):
            # pytest-django sets the test database up only for tests that ask for it by marker
            # or fixture; these share it with the servers outside any test transaction, so when
            # this module runs alone it is set up here, as pytest-django would (kept for reuse).
            setup_databases(verbosity=0, interactive=False, keepdb=True, aliases={"default"})
        if connection.vendor != "postgresql":
            pytest.skip("the servers share the test database, which needs PostgreSQL")
        AcceptedRequest.objects.all().delete()
        DroppedRequest.objects.all().delete()
        product, _ = product_create(name="Differential")
        key = IngestionKey.objects.create(product=product, label="differential", key=KEY)
    env = {
        **os.environ,
        "DJANGO_ENV": "production",
        "DEBUG": "false",
        "SECRET_KEY": "test-only-" + "x" * 40,
        "FIELD_ENCRYPTION_SALT": "test-only-salt",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DATABASE_URL": database_url_of_tests(),
        "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        "STATIC_ROOT": str(tmp_path_factory.mktemp("static")),
        "LOG_LEVEL": "ERROR",
    }
    started: list[Door] = []
    try:
        for name, server in (("wsgi", "drf"), ("asgi", "asgi")):
            port = free_port()
            started.append(Door(name, port, serve_in_subprocess(server, port, env)))
        for door in started:
            wait_for_http(f"http://127.0.0.1:{door.port}", door.process)
        yield Doors(wsgi=started[0], asgi=started[1], product_id=product.id, digest=key.digest)
    finally:
        for door in started:
            if door.process.poll() is None:
                os.killpg(door.process.pid, signal.SIGTERM)
                door.process.wait(timeout=15)
        with django_db_blocker.unblock():
            _flush_database()


@pytest.fixture
def database(django_db_blocker):
    """The test database, in autocommit, shared with the servers (nothing is rolled back: each
    example drains what it stored)."""
    with django_db_blocker.unblock():
        yield


# --- One request to both doors, and every check ----------------------------------------------


@dataclass
class Seen:
    answer: Answer | None
    rows: list[dict]

    @property
    def status(self) -> int | None:
        return self.answer.status if self.answer else None


def _last_id(model) -> int:
    return model.objects.aggregate(last=Max("id"))["last"] or 0


def _rows_after(last_id: int) -> list[dict]:
    return list(
        AcceptedRequest.objects.filter(id__gt=last_id)
        .order_by("id")
        .values("id", "endpoint", "key_digest", "messages", "request_count")
    )


def _send(door: Door, req: Req) -> Seen:
    assert door.process.poll() is None, f"the {door.name} server process has exited"
    mark = _last_id(AcceptedRequest)
    answer = exchange(door.port, req)
    rows = _rows_after(mark)
    if (answer is None or req.incomplete) and door.name == "asgi" and not rows:
        # uvicorn closes as soon as the client shuts its side, and the app goes on: wait a
        # little for whatever it may still store.
        deadline = time.monotonic() + 0.3
        while not rows and time.monotonic() < deadline:
            time.sleep(0.03)
            rows = _rows_after(mark)
    return Seen(answer, rows)


def send_to_both(doors: Doors, req: Req) -> dict[str, Seen]:
    seen = {door.name: _send(door, req) for door in doors.both}
    if currently_in_test_context():  # Hypothesis prints these notes with the failing example
        note(f"request: {req!r}")
        for name, result in seen.items():
            note(f"{name} door answered {result.answer!r}; stored {len(result.rows)} row(s)")
    return seen


def _is_2xx(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


_FAILURE_TYPES: dict[tuple[str, str], type[AssertionError]] = {}


def fail(req: Req, check: str, message: str) -> None:
    """Raise an AssertionError whose type names the check and the class of input, so Hypothesis
    reports each (check, class) as a distinct failure with its own minimal example, even in the
    test that mixes every class."""
    key = (check, req.kind)
    if key not in _FAILURE_TYPES:
        words = "".join(c if c.isalnum() else " " for c in f"{check} {req.kind}").split()
        name = "".join(word.capitalize() for word in words)
        _FAILURE_TYPES[key] = type(name, (AssertionError,), {"__module__": __name__})
    raise _FAILURE_TYPES[key](f"[{check}; {req.kind}] {message}")


@dataclass
class Drained:
    """What draining this example's requests left behind."""

    apply_failed: list[dict]
    left: int
    not_applied: list[dict]
    unreadable: list[str]
    rows: list[dict]


def _read_back(model, **lookup) -> tuple[bool, str | None]:
    """(found, why the row cannot be read back): every field is loaded, as the read API and the
    next apply do, so a value PostgreSQL stores and Python cannot hold (a time before year 1)
    shows here."""
    try:
        row = model.objects.filter(**lookup).order_by("pk").first()
    except (DataError, ValueError, OverflowError) as exc:
        return True, f"{model.__name__} {lookup}: {exc}"
    return row is not None, None


def drain(doors: Doors, seen: dict[str, Seen]) -> Drained:
    """Apply everything stored, as a worker does, and look at the result: drops of reason
    apply_failed, rows left in the store, messages the doors stored for the tenant that are not
    in the domain afterwards (users, accounts, events), and rows that cannot be read back.
    Then the tenant's domain data is emptied, so each example stands alone (its minimal example
    is the whole story)."""
    rows = [row for result in seen.values() for row in result.rows]
    ours = [
        message
        for row in rows
        if row["key_digest"] == doors.digest
        for message in row["messages"]
        if message.get("type") != "drop"
    ]
    mark = _last_id(DroppedRequest)
    while accepted_requests_drain(limit=10_000).requests:
        pass
    failed = list(
        DroppedRequest.objects.filter(id__gt=mark, reason="apply_failed").values(
            "endpoint", "detail", "item_index"
        )
    )
    not_applied, unreadable = [], []
    claimed: set[str] = set()  # a messageId is applied once: its first message, in store order
    product = doors.product_id
    for message in ours:
        message_id = message.get("messageId")
        if message_id is not None:
            if message_id in claimed:
                continue  # the other door's copy, or a repeat in the batch: deduplicated
            claimed.add(message_id)
        user_id, kind = message.get("userId"), message.get("type")
        checks = []
        if kind == "identify":
            checks.append((User, {"product_id": product, "tracking_id": user_id}))
        elif kind == "group":
            checks.append((Account, {"product_id": product, "tracking_id": message.get("groupId")}))
        else:
            checks.append((User, {"product_id": product, "tracking_id": user_id}))
            lookup = {"product_id": product, "user__tracking_id": user_id}
            checks.append((Event, {**lookup, "name": message.get("event")}))
        for model, lookup in checks:
            found, problem = _read_back(model, **lookup)
            if problem:
                unreadable.append(problem)
            elif not found:
                not_applied.append(message)
    left = AcceptedRequest.objects.count()
    forget_domain()
    return Drained(failed, left, not_applied, unreadable, rows)


def forget_domain() -> None:
    """Empty what applying wrote (users, accounts, events, rollups, scores, seen messageIds);
    the products, workspaces and keys stay."""
    keep = {"Product", "Workspace", "EventWeight", "ScoringState", "Segment"}
    tables = [
        model._meta.db_table
        for model in apps.get_app_config("engagement").get_models()
        if model.__name__ not in keep and not model._meta.proxy and model._meta.managed
    ]
    tables.append(SeenMessage._meta.db_table)
    # DELETE, not TRUNCATE: an example leaves a few rows, and truncating these tables and the
    # events' daily partitions takes about 65 ms a call against 3 ms, over some 1,300 examples.
    # One transaction, so the foreign keys (deferred) are checked once every table is empty.
    with transaction.atomic(), connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"DELETE FROM {connection.ops.quote_name(table)}")  # noqa: S608


def check_store(req: Req, seen: dict[str, Seen]) -> None:
    """Only whole requests are stored, and only those answered 2xx."""
    for name, result in seen.items():
        if req.incomplete and result.rows:
            fail(
                req,
                f"incomplete request stored by {name}",
                f"the {name} door STORED an incomplete request ({req.what}) and answered "
                f"{result.answer!r}: {req!r} -> stored {[row['messages'] for row in result.rows]}",
            )
        if req.incomplete and _is_2xx(result.status):
            fail(
                req,
                f"incomplete request answered 2xx by {name}",
                f"the {name} door answered {result.answer!r} to an incomplete request: {req!r}",
            )
        if not req.incomplete and not _is_2xx(result.status) and result.rows:
            fail(
                req,
                f"stored without a 2xx by {name}",
                f"the {name} door stored a request it answered {result.answer!r}: {req!r}",
            )


def check_applied(req: Req, drained: Drained) -> None:
    if drained.apply_failed:
        fail(
            req,
            "apply_failed",
            f"accepted, then dropped as apply_failed: {drained.apply_failed}; the stored "
            f"messages: {[row['messages'] for row in drained.rows]}; request {req!r}",
        )
    if drained.left:
        fail(req, "left in store", f"{drained.left} accepted request(s) left after draining")
    if drained.unreadable:
        fail(
            req,
            "unreadable after apply",
            f"applied, but the rows cannot be read back: {drained.unreadable}; the stored "
            f"messages: {[row['messages'] for row in drained.rows]}; request {req!r}",
        )
    if drained.not_applied:
        fail(
            req,
            "not applied",
            f"accepted and drained, but not in the domain: {drained.not_applied}; {req!r}",
        )


def check_same_answer(req: Req, seen: dict[str, Seen]) -> None:
    """Same status, same body (JSON as parsed), from both doors. An incomplete request is owed
    no answer, only the store rules."""
    if req.incomplete:
        return
    wsgi, asgi = seen["wsgi"].answer, seen["asgi"].answer
    if wsgi is None or asgi is None:
        if wsgi is not None or asgi is not None:
            fail(req, "one door silent", f"wsgi {wsgi!r} / asgi {asgi!r} for {req!r}")
        return
    if wsgi.status != asgi.status:
        fail(req, "status differs", f"wsgi {wsgi!r} / asgi {asgi!r} for {req!r}")
    if from_the_server(wsgi) or from_the_server(asgi):
        return  # refused by gunicorn or uvicorn before the service: the status alone is owed
    if wsgi.parsed() != asgi.parsed():
        fail(
            req,
            "body differs",
            f"both {wsgi.status}: wsgi {wsgi.body!r} / asgi {asgi.body!r} for {req!r}",
        )


def check_no_server_error(req: Req, seen: dict[str, Seen]) -> None:
    for name, result in seen.items():
        if result.status is not None and result.status >= 500 and result.status != 503:
            fail(req, f"server error from {name}", f"the {name} door answered {result.answer!r}")


def from_the_server(answer) -> bool:
    """An answer gunicorn or uvicorn gave on its own, before the service saw the request: a
    malformed request (Content-Length with chunked, a chunk size that is not hex, a repeated Host
    or Content-Type), or one past the server's own limits, which gunicorn.conf.py raises above
    the service's (a request line over 8,190 bytes, a header field over 64 KiB, over 200 fields).
    The status is the same on both doors; the body is each server's own page (docs/acceptance.md).
    """
    return answer.body.startswith(b"<html>\n  <head>\n    <title>") or (
        answer.body == b"Invalid HTTP request received."
    )


def check_security_headers(req: Req, seen: dict[str, Seen]) -> None:
    wsgi, asgi = seen["wsgi"].answer, seen["asgi"].answer
    if wsgi is None or asgi is None or from_the_server(wsgi) or from_the_server(asgi):
        return
    differ = {
        name: (wsgi.header(name), asgi.header(name))
        for name in SECURITY_HEADERS
        if wsgi.header(name) != asgi.header(name)
    }
    if differ:
        fail(
            req,
            "security headers differ",
            f"(wsgi, asgi) on {wsgi.status}/{asgi.status}: {differ} for {req!r}",
        )


def _rejected_indexes(answer: Answer) -> set:
    kind, body = answer.parsed()
    if kind != "json" or not isinstance(body, dict):
        return set()
    rejected = body.get("rejected", [])
    if not isinstance(rejected, list):
        return set()
    return {item.get("index") for item in rejected if isinstance(item, dict)}


def check_rules(req: Req, seen: dict[str, Seen]) -> None:
    """What the contract says about this request, door by door."""
    for name, result in seen.items():
        if req.incomplete or result.answer is None:
            continue
        if req.header_too_large:
            if result.status != 431:
                fail(
                    req,
                    "large header not 431",
                    f"the {name} door answered {result.answer!r} to a header value above 8 KiB "
                    f"({req.what}); the rule is 431",
                )
            continue
        if not req.refuse or not _is_2xx(result.status):
            continue
        if req.endpoint in BATCH:
            rejected = _rejected_indexes(result.answer)
            missing = {i: why for i, why in req.refuse.items() if i not in rejected}
            if missing:
                fail(
                    req,
                    "batch item promised against the rules",
                    f"the {name} door did not reject items {missing}; answered "
                    f"{result.answer!r}, stored {[row['messages'] for row in result.rows]} "
                    f"for {req!r}",
                )
        elif req.endpoint == "segment":
            kept = [m for row in result.rows for m in row["messages"] if m.get("type") != "drop"]
            if kept:
                fail(
                    req,
                    "segment message promised against the rules",
                    f"the {name} door answered {result.answer!r} ({req.refuse[0]}) and stored "
                    f"{kept} for {req!r}",
                )
        else:
            fail(
                req,
                "call promised against the rules",
                f"the {name} door answered {result.answer!r} ({req.refuse[0]}) and stored "
                f"{[r['messages'] for r in result.rows]} for {req!r}",
            )


def check_doors_agree(doors: Doors, req: Req) -> dict[str, Seen]:
    """The differential checks: send to both doors, drain, then check, the gravest first (one
    example raises one failure): whole requests only, everything accepted applied, the same
    answer from both, no server error."""
    seen = send_to_both(doors, req)
    drained = drain(doors, seen)
    check_store(req, seen)
    check_applied(req, drained)
    check_same_answer(req, seen)
    check_no_server_error(req, seen)
    return seen


def check_rules_hold(doors: Doors, req: Req) -> dict[str, Seen]:
    """The rules alone (431, depth, times), door by door, whether or not the doors agree."""
    seen = send_to_both(doors, req)
    drain_quietly()
    check_rules(req, seen)
    return seen


def check_everything(doors: Doors, req: Req) -> dict[str, Seen]:
    seen = send_to_both(doors, req)
    drained = drain(doors, seen)
    check_store(req, seen)
    check_applied(req, drained)
    check_same_answer(req, seen)
    check_rules(req, seen)
    check_no_server_error(req, seen)
    return seen


def drain_quietly() -> None:
    while accepted_requests_drain(limit=10_000).requests:
        pass
    forget_domain()


def examples(n: int):
    return settings(
        max_examples=n * SCALE,
        deadline=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
        ],
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
        print_blob=True,
    )


# --- The properties --------------------------------------------------------------------------
# Hypothesis stops generating at the first failing example and reports the distinct failures it
# meets while shrinking it, so each class of input has a test of its own: one class's bug does
# not hide another's. The rules (431, depth, times, chunked) have tests of their own too, so a
# rule both doors break alike does not hide a difference between them.


@examples(50)
@given(req=valid_requests())
def test_valid_requests(doors, database, req):
    check_doors_agree(doors, req)


@examples(50)
@given(req=segment_batches())
def test_segment_batches(doors, database, req):
    check_doors_agree(doors, req)


@examples(40)
@given(req=path_variants())
def test_path_variants(doors, database, req):
    check_doors_agree(doors, req)


@examples(30)
@given(req=host_variants())
def test_host_header(doors, database, req):
    check_doors_agree(doors, req)


@examples(50)
@given(req=duplicate_headers())
def test_duplicate_headers(doors, database, req):
    check_doors_agree(doors, req)


@examples(50)
@given(req=gzip_bodies())
def test_gzip_bodies(doors, database, req):
    check_doors_agree(doors, req)


@examples(40)
@given(req=chunked_bodies())
def test_chunked_bodies(doors, database, req):
    check_doors_agree(doors, req)


@examples(40)
@given(req=truncated_bodies())
def test_incomplete_bodies(doors, database, req):
    check_doors_agree(doors, req)


@examples(30)
@given(req=large_headers())
def test_large_header_values(doors, database, req):
    check_doors_agree(doors, req)


@examples(50)
@given(req=deep_requests())
def test_deep_traits(doors, database, req):
    check_doors_agree(doors, req)


@examples(80)
@given(req=timestamp_requests())
def test_timestamps_and_clock_skew(doors, database, req):
    check_doors_agree(doors, req)


@examples(40)
@given(req=number_requests())
def test_big_numbers(doors, database, req):
    check_doors_agree(doors, req)


@examples(60)
@given(req=string_requests())
def test_nul_and_lone_surrogates(doors, database, req):
    check_doors_agree(doors, req)


@examples(60)
@given(req=json_oddities())
def test_json_oddities(doors, database, req):
    check_doors_agree(doors, req)


@examples(30)
@given(req=huge_id_requests())
def test_huge_ids(doors, database, req):
    check_doors_agree(doors, req)


@examples(30)
@given(req=framings())
def test_framing(doors, database, req):
    check_doors_agree(doors, req)


@examples(25)
@given(req=sized_bodies())
def test_body_sizes(doors, database, req):
    check_doors_agree(doors, req)


@examples(150)
@given(req=ANY_REQUEST)
def test_any_request(doors, database, req):
    check_doors_agree(doors, req)


@examples(30)
@given(req=ANY_REQUEST)
def test_security_headers(doors, database, req):
    seen = send_to_both(doors, req)
    drain_quietly()
    check_security_headers(req, seen)


@examples(30)
@given(req=large_headers())
def test_rule_header_values_above_8_kib_get_431(doors, database, req):
    check_rules_hold(doors, req)


@examples(50)
@given(req=deep_requests())
def test_rule_traits_nest_at_most_32_levels(doors, database, req):
    check_rules_hold(doors, req)


@examples(80)
@given(req=timestamp_requests())
def test_rule_message_times_from_1970_to_24_hours_ahead(doors, database, req):
    check_rules_hold(doors, req)


@examples(30)
@given(req=chunked_bodies())
def test_rule_a_chunked_body_is_read_as_with_a_content_length(doors, database, req):
    chunked = send_to_both(doors, req)
    with_length = send_to_both(doors, req.replace(chunks=None, chunk_ext=False))
    drain_quietly()
    for name in ("wsgi", "asgi"):
        a, b = chunked[name].answer, with_length[name].answer
        if (a and (a.status, a.parsed())) != (b and (b.status, b.parsed())):
            fail(
                req,
                f"chunked read unlike Content-Length by {name}",
                f"the {name} door answered {a!r} to a chunked body and {b!r} to the same body "
                f"with a Content-Length: {req!r}",
            )


# --- Explicit cases: one of each class of bug, easy to read ----------------------------------

JSON_HEADERS = (("Content-Type", "application/json"),)
AUTH = (*JSON_HEADERS, ("Authorization", BASIC))
TRACK = b'{"userId":"usr_reg","event":"Login"}'


def _track(**extra) -> bytes:
    return dumps({"userId": "usr_reg", "event": "Login", **extra})


def _case_chunked_stream_cut() -> Req:
    req = Req("v2/track", TRACK, AUTH, chunks=(10,), kind="incomplete")
    return req.replace(cut=len(req.chunked_stream()), what="chunked, no last chunk")


REGRESSIONS = {
    "path //v2/track": lambda: Req("v2/track", TRACK, AUTH, path="//v2/track", kind="path"),
    "path /v2/track/": lambda: Req("v2/track", TRACK, AUTH, path="/v2/track/", kind="path"),
    "path /v2/track//": lambda: Req("v2/track", TRACK, AUTH, path="/v2/track//", kind="path"),
    "Host not in ALLOWED_HOSTS": lambda: Req(
        "v2/track", TRACK, AUTH, host="evil.example", kind="host"
    ),
    "two Authorization headers, the valid one first": lambda: Req(
        "v2/track", TRACK, (*AUTH, ("Authorization", "Bearer abc")), kind="duplicate headers"
    ),
    "two Authorization headers, the valid one second": lambda: Req(
        "v2/track",
        TRACK,
        (*JSON_HEADERS, ("Authorization", "Bearer abc"), ("Authorization", BASIC)),
        kind="duplicate headers",
    ),
    "two Content-Encoding headers, gzip then identity": lambda: Req(
        "v2/track",
        gzip.compress(TRACK, mtime=0),
        (*AUTH, ("Content-Encoding", "gzip"), ("Content-Encoding", "identity")),
        kind="duplicate headers",
    ),
    "gzip body": lambda: Req(
        "v2/track",
        gzip.compress(TRACK, mtime=0),
        (*AUTH, ("Content-Encoding", "gzip")),
        kind="gzip",
    ),
    "truncated gzip body": lambda: Req(
        "v2/track",
        gzip.compress(TRACK, mtime=0)[:-6],
        (*AUTH, ("Content-Encoding", "gzip")),
        kind="gzip",
    ),
    "gzip bomb (5 MB of spaces)": lambda: Req(
        "v2/track",
        gzip.compress(TRACK[:-1] + b" " * 5_000_000 + b"}", mtime=0),
        (*AUTH, ("Content-Encoding", "gzip")),
        kind="gzip",
    ),
    "body shorter than its Content-Length": lambda: Req(
        "v2/track", TRACK + b" " * 20, AUTH, cut=len(TRACK), kind="incomplete"
    ),
    "chunked body without its last chunk": _case_chunked_stream_cut,
    "two Content-Type headers": lambda: Req(
        "v2/track", TRACK, (*AUTH, ("Content-Type", "application/json")), kind="duplicate headers"
    ),
    "two Host headers": lambda: Req(
        "v2/track", TRACK, (*AUTH, ("Host", "127.0.0.1")), kind="duplicate headers"
    ),
    "210 header fields": lambda: Req(
        "v2/track",
        TRACK,
        (*AUTH, *((f"X-Field-{n}", "v") for n in range(210))),
        kind="large header",
    ),
    "request target of 9 KB": lambda: Req(
        "v2/track", TRACK, AUTH, path="/v2/track?q=" + "x" * 9000, kind="path"
    ),
    "chunk size that is not hex": lambda: Req(
        "v2/track", TRACK, AUTH, framing="bad chunk size", kind="framing"
    ),
    "Content-Length and chunked together": lambda: Req(
        "v2/track", TRACK, AUTH, framing="length and chunked", kind="framing"
    ),
    "9 KB header value": lambda: Req(
        "v2/track",
        TRACK,
        (*AUTH, ("X-Padding", "x" * 9000)),
        header_too_large=True,
        kind="large header",
    ),
    "66 KB header value": lambda: Req(
        "v2/track",
        TRACK,
        (*AUTH, ("X-Padding", "x" * 66_000)),
        header_too_large=True,
        kind="large header",
    ),
    "traits 40 levels deep": lambda: Req(
        "v2/identify",
        dumps({"userId": "usr_reg", "traits": nested(40)}),
        AUTH,
        refuse={0: "traits 40 levels deep"},
        kind="depth",
    ),
    "traits 100 levels deep in a batch item": lambda: Req(
        "v1/batch",
        dumps({"batch": [{"type": "identify", "userId": "usr_reg", "traits": nested(100)}]}),
        AUTH,
        refuse={0: "traits 100 levels deep"},
        kind="depth",
    ),
    "v2 timestamp 1969-12-31T23:59:59Z": lambda: Req(
        "v2/track",
        _track(timestamp="1969-12-31T23:59:59Z"),
        AUTH,
        refuse={0: "before 1970"},
        kind="time",
    ),
    "segment timestamp 0001-01-01 with sentAt far in the future": lambda: Req(
        "segment",
        dumps(
            {
                "type": "track",
                "userId": "usr_reg",
                "event": "Login",
                "timestamp": "0001-01-01T00:00:00Z",
                "sentAt": "9999-01-01T00:00:00Z",
            }
        ),
        AUTH,
        refuse={0: "before 1970 after skew correction"},
        kind="time",
    ),
    "segment timestamp 2020 with sentAt in 9999 (corrected before year 1)": lambda: Req(
        "segment",
        dumps(
            {
                "type": "track",
                "userId": "usr_reg",
                "event": "Login",
                "timestamp": "2020-01-01T00:00:00Z",
                "sentAt": "9999-01-01T00:00:00Z",
            }
        ),
        AUTH,
        refuse={0: "before 1970 after skew correction"},
        kind="time",
    ),
    "batch item at 0001-01-01, batch sentAt far in the future": lambda: Req(
        "v1/batch",
        dumps(
            {
                "batch": [
                    {
                        "type": "track",
                        "userId": "usr_reg",
                        "event": "Login",
                        "timestamp": "0001-01-01T00:00:00Z",
                    }
                ],
                "sentAt": "9999-01-01T00:00:00Z",
            }
        ),
        AUTH,
        refuse={0: "before 1970 after skew correction"},
        kind="time",
    ),
    "big numbers in traits": lambda: Req(
        "v2/identify",
        dumps(
            {
                "userId": "usr_reg",
                "traits": {"n": 2**64, "m": -(10**40), "f": Lit("1.7976931348623157e308")},
            }
        ),
        AUTH,
        kind="numbers",
    ),
    "NUL in properties (never stored)": lambda: Req(
        "v2/track", _track(properties={"note": "a\x00b"}), AUTH, kind="strings"
    ),
    "NUL in a trait": lambda: Req(
        "v2/identify",
        dumps({"userId": "usr_reg", "traits": {"a": "x\x00y"}}),
        AUTH,
        kind="strings",
    ),
    "lone surrogate in a trait, escaped": lambda: Req(
        "v2/identify",
        dumps({"userId": "usr_reg", "traits": {"a": "\ud800"}}),
        AUTH,
        kind="strings",
    ),
    "lone surrogate in a trait, as raw bytes": lambda: Req(
        "v2/identify",
        dumps({"userId": "usr_reg", "traits": {"a": "\ud800"}}, ascii_only=False),
        AUTH,
        kind="strings",
    ),
    "duplicate userId key": lambda: Req(
        "v2/track",
        dumps(Pairs([("userId", "usr_a"), ("event", "Login"), ("userId", "usr_b")])),
        AUTH,
        kind="json",
    ),
    "byte order mark": lambda: Req("v2/track", b"\xef\xbb\xbf" + TRACK, AUTH, kind="json"),
    "NaN in traits": lambda: Req(
        "v2/identify",
        dumps({"userId": "usr_reg", "traits": {"a": Lit("NaN")}}),
        AUTH,
        kind="json",
    ),
    "a JSON array body": lambda: Req("v2/track", b"[]", AUTH, kind="json"),
    "userId of 256 characters": lambda: Req(
        "v2/track", _track(userId="x" * 256), AUTH, kind="huge ids"
    ),
    "userId of 255 emoji": lambda: Req(
        "v2/track", _track(userId="😀" * 255), AUTH, kind="huge ids"
    ),
    "a valid Segment batch of three messages": lambda: Req(
        "v1/batch",
        dumps(
            {
                "batch": [
                    {"type": "identify", "userId": "usr_reg", "traits": {"plan": "pro"}},
                    {"type": "group", "groupId": "acct_reg", "userId": "usr_reg"},
                    {
                        "type": "track",
                        "userId": "usr_reg",
                        "event": "Login",
                        "messageId": f"m-{time.time_ns()}",
                    },
                ],
                "sentAt": iso(now_ms()),
            }
        ),
        AUTH,
        kind="batch",
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("case", list(REGRESSIONS))
def test_regression(doors, database, case):
    check_everything(doors, REGRESSIONS[case]())


@pytest.mark.e2e
@pytest.mark.parametrize("body", [TRACK, b"{}"], ids=["202", "400"])
def test_regression_security_headers(doors, database, body):
    req = Req("v2/track", body, AUTH)
    seen = send_to_both(doors, req)
    drain_quietly()
    check_security_headers(req, seen)


@pytest.mark.e2e
def test_regression_a_chunked_body_is_read(doors, database):
    req = Req("v2/track", TRACK, AUTH, chunks=(10, 10), kind="chunked")
    seen = send_to_both(doors, req)
    drain_quietly()
    for name, result in seen.items():
        assert result.status == 202 and len(result.rows) == 1, (
            f"the {name} door answered {result.answer!r} to a whole chunked body"
        )


@pytest.mark.e2e
@pytest.mark.parametrize(
    "path", ["//v2/workspaces", "/V2/TRACK", "//v1/batch", "/v2//track", "//segment"]
)
def test_regression_an_api_path_that_is_no_endpoint_is_the_json_404(doors, database, path):
    """Not Django's HTML page: under gunicorn a leading `//` reaches Django as it was sent."""
    req = Req("v2/track", TRACK, AUTH, path=path, kind="path", what=path)
    seen = send_to_both(doors, req)
    drain_quietly()
    for name, result in seen.items():
        assert result.status == 404 and result.answer.parsed() == (
            "json",
            {"code": "not_found", "message": f"There is no endpoint at {path}."},
        ), f"the {name} door answered {result.answer!r}"
        assert result.rows == []
