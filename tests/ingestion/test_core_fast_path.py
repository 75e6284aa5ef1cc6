"""The acceptance core's fast path answers exactly as the checked path does, for any body.

`core.accept` tries `accept_fast` first; `core.accept_checked` is the rules as written. Every
body below, valid or not, must get the same outcome (stored messages to the byte, status, body)
or the same error from both. No database (the core is framework-free) except for the last test,
which reads stored messages back.
"""

import gzip
import json
from datetime import UTC, datetime

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingestion import core
from ingestion.models import AcceptedRequest
from ingestion.store import store_accepted
from tests.ingestion.conftest import load_fixture
from tests.ingestion.segment_support import segment_auth

NOW = 1_750_000_000_000
HOUR = 3_600_000
LIMITS = core.Limits(single=32 * 1024, batch=512 * 1024, max_batch_items=50)
AUTH = segment_auth("acme-key")


def iso(ms: int, *, offset: str = "+00:00") -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")[:-6] + offset


def outcome_of(accept, endpoint: str, raw: bytes, authorization: str | None, encoding=None):
    """What a front door would see: the stored messages as stored text, status and body; or the
    error as rendered."""
    try:
        outcome = accept(
            endpoint,
            raw,
            authorization=authorization,
            content_encoding=encoding,
            now_ms=NOW,
            limits=LIMITS,
        )
    except core.RequestError as error:
        return ("error", error.status, error.body(), error.retry_after)
    stored = [
        (accepted.endpoint, accepted.key_digest, json.dumps(accepted.messages))
        for accepted in outcome.accepted
    ]
    return ("ok", outcome.status, json.dumps(outcome.body), stored)


def assert_same(endpoint: str, raw: bytes, authorization: str | None = None, encoding=None):
    fast = outcome_of(core.accept, endpoint, raw, authorization, encoding)
    checked = outcome_of(core.accept_checked, endpoint, raw, authorization, encoding)
    assert fast == checked
    return fast


def mostly(valid: st.SearchStrategy, anything: st.SearchStrategy) -> st.SearchStrategy:
    """Valid values three times in four: the fast path must see many requests it takes."""
    return st.one_of(valid, valid, valid, anything)


# Values chosen at and around every rule of the checked path.
GOOD_IDS = st.sampled_from(["usr_1", "acct_7", " padded ", "x" * 255, "ü-😀", "a\\u0000"])
IDS = mostly(
    GOOD_IDS,
    st.one_of(
        st.sampled_from(["", "   ", "x" * 256, "u\x00x", "\ud800", "a\udfffb"]),
        st.sampled_from([None, 5, 1.5, True, [], {}]),
        st.text(max_size=6),
    ),
)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e19, -1e19, 9.3e18, 2.0**63, 1e308, 5e-324, -0.0]),
)
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=6)),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
TRAITS = mostly(
    st.one_of(st.none(), st.dictionaries(st.sampled_from(["plan", "seats"]), JSON_VALUES)),
    st.one_of(
        st.dictionaries(st.sampled_from(["k\x00", "n\ud800", "big"]), JSON_VALUES, max_size=2),
        st.sampled_from(["oops", 7, []]),
    ),
)
EDGES = [
    NOW + d for d in (-6000, -5001, -5000, -4999, 0, 4999, 5000, 5001, 24 * HOUR, 24 * HOUR + 1)
]
GOOD_TIMES = st.one_of(
    st.none(),
    st.sampled_from(EDGES),
    st.sampled_from(EDGES).map(iso),
    st.integers(min_value=NOW - 1000 * 24 * HOUR, max_value=NOW + 72 * HOUR).map(iso),
    st.integers(min_value=NOW - 48 * HOUR, max_value=NOW + 48 * HOUR),
)
CALL_TIMES = st.one_of(
    st.sampled_from([NOW, NOW + 24 * HOUR]),
    st.sampled_from([NOW, NOW + 24 * HOUR]).map(iso),
    st.integers(min_value=NOW - 1000 * 24 * HOUR, max_value=NOW + 24 * HOUR).map(iso),
    st.integers(min_value=NOW - 48 * HOUR, max_value=NOW + 24 * HOUR),
)
TIMES = mostly(
    GOOD_TIMES,
    st.sampled_from(
        [
            "2025-06-13T04:45:14.400+00:00",
            "2025-06-13T04:45:14.400000+02:00",
            "2025-06-13T04:45:14Z",
            "2025-06-13t04:45:14z",
            "2025-06-13T04:45:14",
            " 2025-06-13T04:45:14Z ",
            "1749789914400",
            "-1749789914400",
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-01:00",
            "0001-01-01T00:00:00",
            "not a time",
            "",
            "  ",
            True,
            1749789914400.5,
            10**20,
            -(10**20),
            253_402_300_799_999,
            -62_135_596_800_000,
            [],
        ]
    ),
)
KINDS = mostly(
    st.sampled_from(["track", "identify", "group", "page", "screen"]),
    st.sampled_from(["alias", " Track ", "IDENTIFY", "", " ", None, 3]),
)
CONTEXTS = mostly(
    st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {},
            optional={
                "groupId": IDS,
                "traits": TRAITS,
                "library": st.just({"name": "analytics-python", "version": "2.4.0"}),
            },
        ),
    ),
    st.sampled_from(["ctx", 1]),
)
SEGMENT_MESSAGES = mostly(
    st.fixed_dictionaries(
        {"type": KINDS, "userId": IDS},
        optional={
            "groupId": IDS,
            "event": IDS,
            "name": IDS,
            "messageId": IDS,
            "timestamp": TIMES,
            "sentAt": TIMES,
            "receivedAt": st.sampled_from([None, "2025-06-13T04:45:14Z"]),
            "traits": TRAITS,
            "context": CONTEXTS,
            "properties": JSON_VALUES,
            "anonymousId": st.none(),
            "integrations": st.just({}),
        },
    ),
    st.sampled_from([[], "message", 1, None]),
)
CALL_BODIES = st.fixed_dictionaries(
    {"api_key": mostly(st.just("acme-key"), st.sampled_from([" k ", "", 5, None, "k\ud800"]))},
    optional={
        "userId": IDS,
        "groupId": IDS,
        "user_id": IDS,
        "group_id": IDS,
        "event": IDS,
        "timestamp": TIMES,
        "traits": TRAITS,
        "context": CONTEXTS,
    },
)
AUTHORIZATIONS = mostly(
    st.sampled_from([None, segment_auth("acme-key"), "Basic acme-key"]),
    st.sampled_from(["", "Basic", "Bearer x", "Basic a b", "Basic Og=="]),
)


# Requests every rule takes: these must take the fast path, and still match.
FAST_IDS = st.sampled_from(["usr_1", "acct_7", " padded ", "x" * 255, "ü-😀", "a\\b"])
FAST_NUMBERS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-9e18, max_value=9e18),
)
FAST_TRAITS = st.dictionaries(
    st.text(max_size=4).filter(lambda key: "\x00" not in key),
    st.recursive(
        st.one_of(st.none(), st.booleans(), FAST_NUMBERS, st.sampled_from(["Ann", "ü", ""])),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(FAST_IDS, inner, max_size=2),
        max_leaves=6,
    ),
    max_size=3,
)
FAST_CONTEXTS = st.fixed_dictionaries(
    {},
    optional={
        "groupId": FAST_IDS,
        "traits": FAST_TRAITS,
        "library": st.just({"name": "analytics-python", "version": "2.4.0"}),
    },
)
FAST_MESSAGES = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["track", "identify", "group", "page", "screen", "alias"]),
        "userId": FAST_IDS,
        "groupId": FAST_IDS,
        "event": FAST_IDS,
    },
    optional={
        "name": st.one_of(st.none(), FAST_IDS),
        "messageId": FAST_IDS,
        "timestamp": GOOD_TIMES,
        "sentAt": GOOD_TIMES,
        "receivedAt": st.just("2025-06-13T04:45:14Z"),
        "traits": FAST_TRAITS,
        "context": FAST_CONTEXTS,
        "properties": FAST_TRAITS,
    },
)


def encode(body: object, ascii_only: bool) -> bytes:
    return json.dumps(body, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


PROFILE = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROFILE
@given(
    items=st.lists(SEGMENT_MESSAGES, max_size=4),
    sent_at=TIMES,
    write_key=st.sampled_from([None, "acme-key", " ", 3]),
    authorization=AUTHORIZATIONS,
    ascii_only=st.booleans(),
)
def test_a_batch_gets_the_same_answer_from_both_paths(
    items, sent_at, write_key, authorization, ascii_only
):
    body: dict = {"batch": items}
    if sent_at is not None:
        body["sentAt"] = sent_at
    if write_key is not None:
        body["writeKey"] = write_key
    assert_same("v1/batch", encode(body, ascii_only), authorization)


@PROFILE
@given(
    items=st.lists(FAST_MESSAGES, min_size=1, max_size=5),
    sent_at=GOOD_TIMES,
    ascii_only=st.booleans(),
)
def test_a_batch_of_right_messages_takes_the_fast_path(items, sent_at, ascii_only):
    body = {"batch": items, "sentAt": sent_at}
    raw = encode(body, ascii_only)

    fast = core.accept_fast(
        core.ENDPOINTS["v1/batch"], raw, authorization=AUTH, now_ms=NOW, limits=LIMITS
    )

    assert fast is not None
    assert assert_same("v1/batch", raw, AUTH)[0] == "ok"


@PROFILE
@given(
    endpoint=st.sampled_from(["v2/track", "v2/identify", "v2/group"]),
    body=st.fixed_dictionaries(
        {"userId": FAST_IDS, "groupId": FAST_IDS, "event": FAST_IDS},
        # A call more than a day ahead is an error (a Segment message's is a drop).
        optional={"timestamp": CALL_TIMES, "traits": FAST_TRAITS, "context": FAST_CONTEXTS},
    ),
    ascii_only=st.booleans(),
)
def test_a_right_call_takes_the_fast_path(endpoint, body, ascii_only):
    raw = encode(body, ascii_only)

    fast = core.accept_fast(
        core.ENDPOINTS[endpoint], raw, authorization=AUTH, now_ms=NOW, limits=LIMITS
    )

    assert fast is not None
    assert assert_same(endpoint, raw, AUTH)[0] == "ok"


@PROFILE
@given(message=SEGMENT_MESSAGES, authorization=AUTHORIZATIONS, ascii_only=st.booleans())
def test_a_segment_message_gets_the_same_answer_from_both_paths(message, authorization, ascii_only):
    if isinstance(message, dict):
        message["writeKey"] = "acme-key"
    assert_same("segment", encode(message, ascii_only), authorization)


@PROFILE
@given(
    endpoint=st.sampled_from(
        ["v2/track", "v2/identify", "v2/group", "v1/events", "v1/users", "v1/groups"]
    ),
    body=CALL_BODIES,
    authorization=AUTHORIZATIONS,
    ascii_only=st.booleans(),
)
def test_a_call_gets_the_same_answer_from_both_paths(endpoint, body, authorization, ascii_only):
    assert_same(endpoint, encode(body, ascii_only), authorization)


def batch_of(*items: str, extra: str = ', "writeKey": "k"') -> bytes:
    return ('{"batch": [' + ", ".join(items) + "]" + extra + "}").encode()


def identify_with(traits: str) -> bytes:
    return batch_of('{"type": "identify", "userId": "u", "traits": {"n": ' + traits + "}}")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"   ",
        b"[]",
        b'"text"',
        b"{",
        b'{"batch": [{"type": "track"}],}',
        b'\xef\xbb\xbf{"batch": [], "writeKey": "acme-key"}',
        '{"batch": [], "writeKey": "acme-key"}'.encode("utf-16"),
        b'{"batch": [{"type": "track", "userId": "u", "event": "\xff"}], "writeKey": "k"}',
        b'{"batch": [{"type": "track", "userId": "u", "event": "\xed\xa0\x80"}]}',
        identify_with("NaN"),
        identify_with("1e400"),
        identify_with("123456789012345678901234567890"),
        identify_with("[-9223372036854775809, 18446744073709551616, 1e19]"),
        batch_of(
            '{"type": "identify", "userId": "u", "context": {"traits": {"n": 1%s}}}' % ("0" * 20)
        ),
        batch_of('{"type": "track", "userId": "u", "event": "E", "properties": {"n": 1e400}}'),
        batch_of(
            '{"type": "track", "userId": "u", "event": "E"}', extra=', "batch": [], "writeKey": "k"'
        ),
        batch_of('{"type": "track", "userId": "u", "userId": "v", "event": "E"}'),
        batch_of('{"type": "track", "userId": "u", "event": "E\\\\u0000"}'),
        batch_of('{"type": "page", "userId": "u", "name": "a\\u0000"}'),
        b'{"batch": "nope", "writeKey": "k"}',
        b'{"batch": [], "writeKey": "k\\ud800"}',
        b'{"writeKey": "k"}',
        batch_of('{"type": "track", "userId": "u", "event": "E"}', extra=""),
        batch_of(
            '{"type": "track", "userId": "u", "event": "E"}',
            extra=', "sentAt": "x", "writeKey": "k"',
        ),
        batch_of(*['{"type": "track"}'] * 51),
        batch_of(  # checked on its own (a float time), corrected by the batch's sentAt
            '{"type": "track", "userId": "u", "event": "E", "timestamp": 1749000000000.5}',
            '{"type": "track", "userId": "u", "event": "E", "timestamp": 1749000000000}',
            extra=', "sentAt": "2025-06-01T00:00:00Z", "writeKey": "k"',
        ),
        batch_of(
            '{"type": "track"}',
            '{"type": "identify", "userId": "u", "traits": {"n": 1%s}}' % ("0" * 30),
        ),
        batch_of(
            '{"type": "group", "groupId": "g", "timestamp": 1.5, "traits": {"n": 1%s}}' % ("0" * 30)
        ),
        batch_of('{"type": "group", "groupId": "g", "timestamp": 1.5, "traits": {"n": 1e300}}'),
        batch_of('{"type": "identify", "userId": "u", "traits": {"d": [[[[1]]]]}}'),
        batch_of("[" * 1100 + "]" * 1100),
        batch_of(
            '{"type": "identify", "userId": "u", "traits": ' + '{"a": ' * 990 + "1" + "}" * 991
        ),
    ],
)
def test_odd_bodies_get_the_same_answer_from_both_paths(raw):
    assert_same("v1/batch", raw, None)
    assert_same("v1/batch", gzip.compress(raw), None, "gzip")
    assert_same("segment", raw, None)
    assert_same("v2/identify", raw, segment_auth("k"))
    assert_same("v1/users", raw, None)


@given(
    literal=st.from_regex(
        r"-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,25})?([eE][+-]?[0-9]{1,3})?", fullmatch=True
    )
)
@settings(max_examples=1000, deadline=None)
def test_numbers_in_traits_are_stored_as_sent(literal):
    assert_same("v1/batch", identify_with(literal))


def checked_ms(value: str) -> int | None:
    try:
        return core.parse_timestamp_ms(value)
    except (ValueError, OverflowError, OSError):
        return None


def fast_ms(value: str) -> int | None:
    try:
        return core._iso_ms(value)
    except (ValueError, OverflowError, OSError):
        return None


@given(
    moment=st.datetimes(timezones=st.none() | st.timezones()),
    spec=st.sampled_from(["auto", "seconds", "milliseconds", "microseconds", "minutes", "hours"]),
    separator=st.sampled_from(["T", " ", "t", "x"]),
    utc_as=st.sampled_from(["+00:00", "Z", "z", "-00:00"]),
    around=st.sampled_from(["", " ", "\n", "\x85"]),
)
@settings(max_examples=1000, deadline=None)
def test_iso_times_read_to_the_same_millisecond(moment, spec, separator, utc_as, around):
    text = moment.isoformat(sep=separator, timespec=spec).replace("+00:00", utc_as)
    for value in (text, around + text, text + around, text.replace("-", "", 2)):
        assert fast_ms(value) == checked_ms(value)


@pytest.mark.parametrize(
    "value",
    [
        "20250613",
        "202506130445",
        "1749789914400",
        "-1749789914400",
        "2025-06-13",
        "2025-06-13z04:45",
    ],
)
def test_odd_time_texts_read_the_same(value):
    assert fast_ms(value) == checked_ms(value)


@given(text=st.text(alphabet="0123456789-:Tt Zz+.,", max_size=32))
@settings(max_examples=1000, deadline=None)
def test_any_time_text_reads_the_same(text):
    assert fast_ms(text) == checked_ms(text)


@pytest.mark.parametrize(
    "name", ["segment_analytics_python_2_4_0.json", "rudder_sdk_python_2_1_9.json"]
)
def test_sdk_batches_take_the_fast_path(name):
    """What real SDKs send is what the fast path is for: if it stopped taking these, the speed
    would be lost without any other test noticing."""
    body = load_fixture(f"batch/{name}")
    body["sentAt"] = iso(NOW)
    raw = json.dumps(body).encode()

    outcome = core.accept_fast(
        core.ENDPOINTS["v1/batch"], raw, authorization=segment_auth("k"), now_ms=NOW, limits=LIMITS
    )

    assert outcome is not None
    assert len(outcome.accepted[0].messages) == len(body["batch"])
    assert assert_same("v1/batch", raw, segment_auth("k"))[0] == "ok"


def test_a_v2_track_takes_the_fast_path():
    raw = b'{"userId":"usr_1042","event":"Report_Created","context":{"groupId":"acc_17"}}'

    outcome = core.accept_fast(
        core.ENDPOINTS["v2/track"], raw, authorization=segment_auth("k"), now_ms=NOW, limits=LIMITS
    )

    assert outcome is not None
    assert outcome.accepted[0].messages == [
        {
            "type": "track",
            "timestamp": NOW,
            "userId": "usr_1042",
            "event": "Report_Created",
            "groupId": "acc_17",
        }
    ]


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (
            {"type": "identify", "userId": "u", "context": {"traits": {"n": "a\x00b"}}},
            "context.traits",
        ),
        (
            {"type": "identify", "userId": "u", "context": {"traits": {"n\ud800": 1}}},
            "context.traits",
        ),
        ({"type": "page", "userId": "u", "name": "Docs\x00"}, "name"),
        ({"type": "screen", "userId": "u", "name": "\udfff"}, "name"),
    ],
)
def test_strings_no_database_can_store_are_rejected_wherever_they_are_kept(message, field):
    """context.traits and page names are stored too; a NUL or lone surrogate in them would be
    refused by PostgreSQL and the batch retried for ever."""
    raw = encode({"batch": [message], "writeKey": "k"}, True)

    status, body, stored = assert_same("v1/batch", raw)[1:]

    assert status == 200
    assert list(json.loads(body)["rejected"][0]["fields"]) == [field]
    assert [message["type"] for message in json.loads(stored[0][2])] == ["drop"]


def test_a_number_beyond_a_double_is_invalid_json_not_a_retry_loop():
    assert assert_same("v1/batch", identify_with("-1e400"))[1:3] == (
        400,
        {"code": "invalid_json", "message": "The request body is not valid JSON."},
    )


def test_a_write_key_with_a_lone_surrogate_is_a_key_like_any_other():
    """Not a crash: it matches no ingestion key, so the store's key check refuses it later."""
    outcome = assert_same(
        "segment",
        encode({"type": "track", "userId": "u", "event": "E", "writeKey": "k\ud800"}, True),
    )

    assert outcome[0] == "ok"


@pytest.mark.django_db
@pytest.mark.parametrize("big", [2**40, 2**70 + 1, -(2**63) - 1])
def test_stored_messages_read_back_exactly_as_accepted(big):
    """The store writes orjson's text, or Python's for an integer orjson cannot write."""
    traits = {"n": big, "f": 0.1, "e": -2.5e-7, "s": 'tab\there "q" \\ ü 😀', "l": [{"a": None}]}
    body = {
        "writeKey": "k",
        "batch": [
            {"type": "identify", "userId": "ü-😀", "traits": traits},
            {"type": "track", "userId": "u", "event": "E", "context": {"groupId": "g"}},
        ],
    }
    outcome = core.accept(
        "v1/batch",
        json.dumps(body).encode(),
        authorization=None,
        content_encoding=None,
        now_ms=NOW,
        limits=LIMITS,
    )

    store_accepted(outcome.accepted, received_at=timezone.now())

    stored = AcceptedRequest.objects.get().messages
    assert stored == outcome.accepted[0].messages
    assert stored[0]["traits"] == traits
    assert type(stored[0]["traits"]["n"]) is int
