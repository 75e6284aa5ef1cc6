"""POST /v1/batch and /v1/import: what Segment-family server SDKs send, as they send it."""

import json

import pytest

from engagement.models import Account, Event, User
from ingestion import store
from ingestion.models import AcceptedRequest, AnonymousDay, DroppedRequest
from ingestion.services.drain import accepted_requests_drain, accepted_requests_drain_for
from tests.ingestion.segment_support import iso_now, sdk_batch, segment_auth, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

SEGMENT_SDK = "segment_analytics_python_2_4_0.json"
RUDDER_SDK = "rudder_sdk_python_2_1_9.json"

# Both captured batches end with an anonymous-only track (no userId: counted, not rejected;
# tests/ingestion/test_segment_http_api.py) and an alias of usr_ann_old to usr_ann.


@pytest.mark.parametrize("fixture", [SEGMENT_SDK, RUDDER_SDK])
def test_an_sdk_batch_is_applied_and_its_bad_items_listed(acme, post_json, drain, fixture):
    response = post_json(
        "/v1/batch", sdk_batch(fixture, key=acme.key.key), auth=segment_auth(acme.key.key)
    )

    assert response.status_code == 200
    assert response.json() == {"success": True}
    assert AcceptedRequest.objects.count() == 1  # the whole batch is one write
    drain()
    ann = User.objects.get(product=acme.product, tracking_id="usr_ann")
    assert ann.identified is True
    assert ann.traits == {
        "email": "ann@acme.test",
        "name": "Ann",
        "createdAt": "2024-01-01T00:00:00Z",
    }
    account = Account.objects.get(product=acme.product, tracking_id="acct_acme")
    assert account.traits == {"name": "Acme", "plan": "enterprise", "mrr": 99900}
    assert sorted(
        Event.objects.filter(product=acme.product).values_list("name", "account__tracking_id")
    ) == [
        ("Report_Created", "acct_acme"),
        ("Viewed Billing Screen", "acct_acme"),
        ("Viewed Getting Started Page", "acct_acme"),
    ]
    assert not User.objects.filter(tracking_id="anon_1").exists()


def test_an_sdk_session_leaves_nothing_in_the_drop_log(acme, post_json, drain):
    post_json(
        "/v1/batch", sdk_batch(SEGMENT_SDK, key=acme.key.key), auth=segment_auth(acme.key.key)
    )

    drain()
    # The anonymous item (index 5) is counted per key and day, not logged; the alias applied.
    assert not DroppedRequest.objects.exists()
    assert AnonymousDay.objects.get(product=acme.product).messages == 1


def test_v1_import_is_an_alias_of_v1_batch(acme, post_json, drain):
    response = post_json(
        "/v1/import",
        {"batch": [track("usr_ann", "Signed_In")], "sentAt": iso_now()},
        auth=segment_auth(acme.key.key),
    )

    assert response.status_code == 200
    assert response.json() == {"success": True}
    drain()
    assert Event.objects.get(product=acme.product).name == "Signed_In"


def test_write_key_in_the_body_authenticates(acme, post_json, drain):
    body = {"batch": [track("usr_ann", "Signed_In")], "writeKey": acme.key.key}

    response = post_json("/v1/batch", body)

    assert response.status_code == 200
    drain()
    assert Event.objects.filter(product=acme.product).count() == 1


def test_no_key_is_401_in_the_shape_sdks_parse(db, post_json):
    response = post_json("/v1/batch", {"batch": [track("usr_ann", "Signed_In")]})

    assert response.status_code == 401
    assert set(response.json()) == {"code", "message"}
    assert not AcceptedRequest.objects.exists()


def test_an_unknown_key_is_answered_200_then_dropped(acme, post_json, drain):
    body = {"batch": [track("usr_ann", "A"), track("usr_ann", "B")]}

    response = post_json("/v1/batch", body, auth=segment_auth("no-such-key"))

    assert response.status_code == 200
    drain()
    drop = DroppedRequest.objects.get()
    assert (drop.product, drop.reason, drop.message_count) == (None, "unknown_key", 2)
    assert not Event.objects.exists()


def test_a_batch_mixing_valid_and_invalid_items(acme, post_json, drain):
    batch = [
        track("usr_ann", "Report_Created", messageId="m-0"),
        "not an object",
        {"type": "track", "userId": "usr_bob"},
        {"type": "identify", "userId": "usr_bob", "traits": "admin"},
        {"type": "track", "userId": "usr_cy", "event": "E", "timestamp": "not a date"},
        {"type": "identify", "userId": "usr_bob", "traits": {"role": "admin"}},
        {"type": "group", "groupId": "acct_1", "traits": {"plan": "pro"}},
    ]

    response = post_json(
        "/v1/batch", {"batch": batch, "sentAt": iso_now()}, auth=segment_auth(acme.key.key)
    )

    assert response.status_code == 200
    rejected = response.json()["rejected"]
    assert [(r["index"], r["code"]) for r in rejected] == [
        (1, "invalid_message"),
        (2, "invalid_fields"),
        (3, "invalid_fields"),
        (4, "invalid_fields"),
    ]
    assert rejected[1]["fields"] == {"event": ["This field is required."]}
    assert rejected[3]["fields"] == {
        "timestamp": ["Must be an ISO 8601 date-time or Unix milliseconds."]
    }
    drain()
    assert list(Event.objects.values_list("user__tracking_id", "name")) == [
        ("usr_ann", "Report_Created")
    ]
    assert User.objects.get(tracking_id="usr_bob").traits == {"role": "admin"}
    assert Account.objects.get(tracking_id="acct_1").traits == {"plan": "pro"}
    assert not User.objects.filter(tracking_id="usr_cy").exists()
    assert sorted(DroppedRequest.objects.values_list("item_index", flat=True)) == [1, 2, 3, 4]


def test_a_batch_of_only_bad_items_is_200_and_every_item_is_recorded(acme, post_json, drain):
    body = {"batch": [{"type": "log", "userId": "a"}, {"type": "track"}]}

    response = post_json("/v1/batch", body, auth=segment_auth(acme.key.key))

    assert response.status_code == 200
    assert len(response.json()["rejected"]) == 2
    drain()
    assert DroppedRequest.objects.filter(product=acme.product).count() == 2


def test_an_empty_batch_is_200_and_stores_nothing(acme, post_json):
    response = post_json("/v1/batch", {"batch": []}, auth=segment_auth(acme.key.key))

    assert response.status_code == 200
    assert response.json() == {"success": True}
    assert not AcceptedRequest.objects.exists()


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"sentAt": "2025-01-01T00:00:00Z"}, "invalid_fields", "batch"),
        ({"batch": {"type": "track"}}, "invalid_fields", "batch"),
        ({"batch": [], "sentAt": "last tuesday"}, "invalid_fields", "sentAt"),
    ],
)
def test_a_body_without_a_batch_list_is_400(acme, post_json, body, code, field):
    response = post_json("/v1/batch", body, auth=segment_auth(acme.key.key))

    assert response.status_code == 400
    assert response.json()["code"] == code
    assert field in response.json()["fields"]


def test_a_body_that_is_not_json_is_400(acme, post_json):
    response = post_json("/v1/batch", "{batch: [", auth=segment_auth(acme.key.key))

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_json"


def test_2500_items_are_accepted_and_2501_are_413(acme, post_json):
    items = [track(f"usr_{i}", "E") for i in range(2500)]
    auth = segment_auth(acme.key.key)

    assert post_json("/v1/batch", {"batch": items}, auth=auth).status_code == 200
    too_many = post_json("/v1/batch", {"batch": [*items, track("usr_x", "E")]}, auth=auth)

    assert too_many.status_code == 413
    assert too_many.json()["code"] == "too_many_messages"
    assert len(AcceptedRequest.objects.get().messages) == 2500


def test_a_batch_above_32_kib_but_within_512_kib_is_accepted(acme, post_json, drain):
    items = [track(f"usr_{i}", "E", properties={"pad": "x" * 900}) for i in range(200)]
    body = json.dumps({"batch": items})
    assert 32 * 1024 < len(body) < 512 * 1024

    response = post_json("/v1/batch", body, auth=segment_auth(acme.key.key))

    assert response.status_code == 200
    drain()
    assert Event.objects.count() == 200


def test_a_batch_above_512_kib_is_413(acme, post_json):
    items = [track(f"usr_{i}", "E", properties={"pad": "x" * 1000}) for i in range(600)]

    response = post_json("/v1/batch", {"batch": items}, auth=segment_auth(acme.key.key))

    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert not AcceptedRequest.objects.exists()


def test_503_with_retry_after_when_the_store_cannot_take_the_batch(acme, post_json, settings):
    settings.INGESTION_BACKLOG_LIMIT = 1
    post_json("/v2/track", {"userId": "usr_ann", "event": "E"}, auth=acme.basic)
    store.backlog_refresh()

    response = post_json(
        "/v1/batch", {"batch": [track("usr_ann", "E")]}, auth=segment_auth(acme.key.key)
    )

    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1
    assert response.json()["code"] == "service_unavailable"


def test_a_drain_takes_batches_up_to_its_message_budget(acme, post_json):
    auth = segment_auth(acme.key.key)
    for b in range(3):
        items = [track(f"usr_{b}_{i}", "E") for i in range(600)]
        assert post_json("/v1/batch", {"batch": items}, auth=auth).status_code == 200

    first = accepted_requests_drain(limit=1000)

    assert (first.requests, first.more) == (2, True)  # 1,200 messages, not all 1,800
    assert Event.objects.count() == 1200
    result, more = accepted_requests_drain_for(seconds=10, batch=1000)
    assert (result.requests, more) == (1, False)
    assert Event.objects.count() == 1800


def test_a_drain_of_calls_and_batches_stops_at_its_budget_and_leaves_the_rest(acme, post_json):
    auth = segment_auth(acme.key.key)
    for n in range(30):
        post_json("/v2/track", {"userId": f"usr_{n}", "event": "Single"}, auth=acme.basic)
    post_json("/v1/batch", {"batch": [track("usr_b", "Batched") for _ in range(50)]}, auth=auth)
    post_json("/v2/track", {"userId": "usr_last", "event": "Single"}, auth=acme.basic)

    first = accepted_requests_drain(limit=25)
    second = accepted_requests_drain(limit=25)
    third = accepted_requests_drain(limit=25)

    # 25 calls; then 5 calls and the 50-message batch (a request is never split); then the last.
    assert [(d.requests, d.more) for d in (first, second, third)] == [
        (25, True),
        (6, True),
        (1, False),
    ]
    assert Event.objects.filter(name="Single").count() == 31
    assert Event.objects.filter(name="Batched").count() == 50
    assert not AcceptedRequest.objects.exists()
