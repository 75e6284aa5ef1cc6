"""The acceptance rules on their own (no server, no database): what is accepted is what the worker
and the database take. Each case is one a worker could lose, a door could answer 500 to, or the
two doors could answer differently, if the rules let it through."""

import json

import pytest

from ingestion import acceptance
from ingestion.acceptance import keys
from ingestion.acceptance.fields import MAX_TRAITS_DEPTH
from tests.ingestion.segment_support import segment_auth

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

NOW = 1_750_000_000_000
MINUTE = 60_000
LIMITS = acceptance.Limits(single=32 * 1024, batch=512 * 1024)
AUTH = segment_auth("acme-key")
YEAR_1 = "0001-01-01T00:00:00Z"  # .NET's DateTime.MinValue: an unset date field


def iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def accept(endpoint: str, body, *, authorization: str | None = AUTH) -> acceptance.Outcome:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return acceptance.accept(
        endpoint,
        raw,
        authorization=authorization,
        content_encoding=None,
        now_ms=NOW,
        limits=LIMITS,
    )


def refused(endpoint: str, body, **kwargs) -> acceptance.RequestError:
    with pytest.raises(acceptance.RequestError) as caught:
        accept(endpoint, body, **kwargs)
    return caught.value


def nested(depth: int) -> dict:
    """A traits object `depth` levels deep, the traits object itself the first."""
    traits: dict = {"leaf": 1}
    for _ in range(depth - 1):
        traits = {"n": traits}
    return traits


def nested_text(depth: int) -> str:
    return '{"n": ' * (depth - 1) + '{"leaf": 1}' + "}" * (depth - 1)


def track(**extra) -> dict:
    return {"type": "track", "userId": "usr_ann", "event": "Report_Created", **extra}


# --- Times: 1970-01-01 to 24 h ahead, after clock-skew correction ----------------------------


def test_a_year_1_item_with_a_far_future_sent_at_is_rejected_alone_in_its_batch():
    batch = {
        "batch": [track(), track(timestamp=YEAR_1, sentAt="2999-01-01T00:00:00Z")],
        "sentAt": iso(NOW),
    }

    outcome = accept("v1/batch", batch)

    assert outcome.status == 200
    assert [(r["index"], r["code"]) for r in outcome.body["rejected"]] == [(1, "invalid_fields")]
    assert "1970" in outcome.body["rejected"][0]["fields"]["timestamp"][0]
    kept = outcome.accepted[0].messages
    assert [m["type"] for m in kept] == ["track", "drop"]


def test_a_year_1_identify_sent_a_minute_ahead_is_a_400_at_the_segment_endpoint():
    message = {
        "type": "identify",
        "userId": "usr_ann",
        "timestamp": YEAR_1,
        "sentAt": iso(NOW + MINUTE),
    }

    error = refused("segment", message)

    assert (error.status, list(error.fields)) == (400, ["timestamp"])


@pytest.mark.parametrize("endpoint", ["v2/track", "v1/events"])
def test_a_call_before_1970_is_a_400(endpoint):
    body = {"userId": "usr_ann", "user_id": "usr_ann", "event": "E", "timestamp": -1000}
    body["api_key"] = "acme-key"

    error = refused(endpoint, body, authorization="Basic acme-key")

    assert error.fields == {"timestamp": [acceptance.fields.TOO_EARLY]}


def test_the_first_millisecond_of_1970_is_accepted():
    body = {"userId": "u", "event": "E", "timestamp": "1970-01-01T00:00:00Z"}

    assert accept("v2/track", body).accepted[0].messages[0]["timestamp"] == 0


@pytest.mark.parametrize("seconds", [1_793_527_200, "1793527200", 0, 99_999_999_999])
def test_a_time_in_unix_seconds_is_a_400_that_says_to_send_milliseconds(seconds):
    body = {"api_key": "acme-key", "user_id": "u", "event": "E", "timestamp": seconds}

    error = refused("v1/events", body)

    assert error.fields == {"timestamp": [acceptance.fields.LOOKS_LIKE_SECONDS]}


def test_a_time_in_unix_milliseconds_from_1973_on_is_taken():
    body = {"api_key": "acme-key", "user_id": "u", "event": "E", "timestamp": 100_000_000_000}

    assert accept("v1/events", body).accepted[0].messages[0]["timestamp"] == 100_000_000_000


def test_segments_test_connection_gets_a_2xx_and_stores_nothing():
    outcome = accept("segment", {})

    assert (outcome.status, outcome.body, outcome.accepted) == (202, None, [])
    assert refused("segment", {}, authorization=None).status == 401


# --- Traits: 32 levels, 32 KiB, names of 255 characters, storable strings ---------------------


@pytest.mark.parametrize("endpoint", ["v2/identify", "v2/group"])
def test_traits_nest_at_most_32_levels(endpoint):
    body = {"userId": "u", "groupId": "g", "traits": nested(MAX_TRAITS_DEPTH)}
    assert accept(endpoint, body).accepted

    body["traits"] = nested(MAX_TRAITS_DEPTH + 1)
    error = refused(endpoint, body)
    assert error.fields == {"traits": ["Must nest at most 32 levels deep."]}


@pytest.mark.parametrize("depth", [33, 500, 950, 979])
def test_a_deep_identify_in_a_batch_is_rejected_and_its_neighbours_kept(depth):
    good = [json.dumps(track(messageId=f"m-{i}")) for i in range(50)]
    # Written out by hand: json.dumps itself recurses too deeply for the deepest of these.
    deep = '{"type": "identify", "userId": "usr_ann", "traits": ' + nested_text(depth) + "}"
    raw = '{"batch": [' + ", ".join([*good[:25], deep, *good[25:]]) + "]}"
    outcome = accept("v1/batch", raw.encode())

    assert [r["index"] for r in outcome.body["rejected"]] == [25]
    kept = outcome.accepted[0].messages
    assert sum(m["type"] == "track" for m in kept) == 50


def test_rudderstack_context_traits_are_held_to_the_same_rules():
    message = {"type": "identify", "userId": "u", "context": {"traits": nested(40)}}

    assert list(refused("segment", message).fields) == ["context.traits"]


TOO_LARGE = "Must be at most 32 KiB (32,768 bytes) as UTF-8 JSON."


def test_traits_larger_than_32_kib_are_refused():
    body = {"userId": "u", "traits": {f"t{i}": "x" * 1000 for i in range(40)}}

    error = accept("v1/batch", {"batch": [{"type": "identify", **body}]}).body["rejected"][0]

    assert error["fields"] == {"traits": [TOO_LARGE]}


EMOJI_TRAITS = {"bio": "\U0001f600" * 32_000}  # 32,010 characters, 128,011 bytes as JSON
AT_THE_LIMIT = {"bio": "x" * (32 * 1024 - len('{"bio":""}'))}  # 32,768 bytes exactly
WIDE_LIMITS = acceptance.Limits(single=512 * 1024, batch=512 * 1024)


def identify_body(endpoint: str, traits: dict) -> dict:
    if endpoint == "segment":
        return {"type": "identify", "userId": "u", "traits": traits}
    if endpoint == "v1/users":
        return {"api_key": "acme-key", "user_id": "u", "traits": traits}
    return {"userId": "u", "traits": traits}


@pytest.mark.parametrize("endpoint", ["v2/identify", "v1/users", "segment"])
def test_the_traits_limit_counts_bytes_not_characters_on_every_door(endpoint):
    """Even where a larger body is allowed: 32,000 emoji are 125 KiB, not 32."""

    def call(traits: dict) -> acceptance.Outcome:
        raw = json.dumps(identify_body(endpoint, traits), ensure_ascii=False).encode()
        return acceptance.accept(
            endpoint, raw, authorization=AUTH, content_encoding=None, now_ms=NOW,
            limits=WIDE_LIMITS,
        )  # fmt: skip

    with pytest.raises(acceptance.RequestError) as caught:
        call(EMOJI_TRAITS)
    assert (caught.value.status, caught.value.fields) == (400, {"traits": [TOO_LARGE]})
    assert call(AT_THE_LIMIT).accepted[0].messages[0]["traits"] == AT_THE_LIMIT
    with pytest.raises(acceptance.RequestError):
        call({"bio": AT_THE_LIMIT["bio"] + "x"})


@pytest.mark.parametrize("where", ["traits", "context.traits"])
def test_a_batch_item_with_32_000_emoji_of_traits_is_rejected_and_one_at_the_limit_kept(where):
    def identify(traits: dict) -> dict:
        if where == "traits":
            return {"type": "identify", "userId": "u", "traits": traits}
        return {"type": "identify", "userId": "u", "context": {"traits": traits}}

    raw = json.dumps(
        {"batch": [identify(EMOJI_TRAITS), identify(AT_THE_LIMIT)]}, ensure_ascii=False
    ).encode()
    outcome = accept("v1/batch", raw)

    assert [(r["index"], r["fields"]) for r in outcome.body["rejected"]] == [
        (0, {where: [TOO_LARGE]})
    ]
    kept = outcome.accepted[0].messages
    assert [m["type"] for m in kept] == ["drop", "identify"] and kept[1]["traits"] == AT_THE_LIMIT


@pytest.mark.parametrize("context_traits", ["plan=pro", ["plan", "pro"], 7, True])
def test_context_traits_that_are_not_an_object_get_the_same_400_as_traits(context_traits):
    message = {"type": "identify", "userId": "u", "context": {"traits": context_traits}}
    top_level = {"type": "identify", "userId": "u", "traits": context_traits}

    error = refused("segment", message)
    assert (error.status, error.code) == (refused("segment", top_level).status, "invalid_fields")
    assert error.fields == {"context.traits": ["Must be a JSON object."]}
    rejected = accept("v1/batch", {"batch": [message, track()]}).body["rejected"]
    assert [(r["index"], r["fields"]) for r in rejected] == [
        (0, {"context.traits": ["Must be a JSON object."]})
    ]


def test_context_traits_null_is_no_traits():
    message = {"type": "identify", "userId": "u", "context": {"traits": None}}

    assert "traits" not in accept("segment", message).accepted[0].messages[0]


def test_a_trait_name_longer_than_255_characters_is_refused():
    error = refused("v2/identify", {"userId": "u", "traits": {"n" * 256: 1}})

    assert "255" in error.fields["traits"][0]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"userId": "u", "traits": {"a": "nul\\u0000"}}',
        b'{"userId": "u", "traits": {"nul\\u0000": 1}}',
        b'{"userId": "u", "traits": {"a": ["\\ud800"]}}',
    ],
)
def test_strings_the_database_refuses_are_refused_anywhere_in_traits(raw):
    assert list(refused("v2/identify", raw).fields) == ["traits"]


def test_an_integer_beyond_64_bits_is_kept_exactly():
    raw = b'{"userId": "u", "traits": {"seats": 12345678901234567890123, "small": 1.5}}'

    message = accept("v2/identify", raw).accepted[0].messages[0]

    assert message["traits"] == {"seats": 12345678901234567890123, "small": 1.5}
    assert "12345678901234567890123" in acceptance.messages_json([message])


# --- Bodies nested deeper than Python recurses -----------------------------------------------


@pytest.mark.parametrize("depth", [941, 947, 980, 1100])
def test_a_deep_body_is_a_clear_400_never_an_error_of_ours(depth):
    # A lone surrogate sends the body to Python's json, whose depth depends on the caller's stack.
    raw = (
        b'{"userId": "u", "event": "E", "x": "\\ud800", "p": '
        + b'{"a": ' * depth
        + b"1"
        + b"}" * depth
        + b"}"
    )

    error = refused("v2/track", raw)

    assert (error.status, error.message) == (400, "The request body is nested too deeply.")


# --- Keys ------------------------------------------------------------------------------------


def test_two_authorization_headers_as_a_server_joins_them_are_a_400():
    error = refused("v2/track", {"userId": "u", "event": "E"}, authorization="Basic a,Basic b")

    assert (error.status, error.message) == (400, "Send one Authorization header, not several.")


def test_the_key_digest_cache_keeps_no_long_header():
    keys._header_digests.clear()
    huge = "Basic " + "k" * 1_000_000

    for _ in range(3):
        keys.digest_from_basic_header(huge + str(_))
    keys.digest_from_basic_header("Basic short-key")

    assert list(keys._header_digests) == ["Basic short-key"]


@pytest.mark.parametrize("kind", [{}, [], 5, None, " "])
def test_a_type_that_is_not_a_name_is_a_field_error_never_an_error_of_ours(kind):
    error = refused("segment", {"type": kind, "userId": "u", "event": "E"})

    assert (error.status, list(error.fields)) == (400, ["type"])
    batch = accept("v1/batch", {"batch": [{"type": kind, "userId": "u"}, track()]})
    assert [r["index"] for r in batch.body["rejected"]] == [0]
