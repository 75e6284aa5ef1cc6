"""POST /segment: one Segment-spec message from a Segment, RudderStack or PostHog destination."""

from datetime import UTC, datetime

import pytest

from engagement.models import Account, Event, Membership, User
from ingestion import store
from ingestion.models import AcceptedRequest, DroppedRequest
from tests.ingestion.conftest import load_fixture
from tests.ingestion.segment_support import segment_auth, track

pytestmark = pytest.mark.both_databases

MESSAGE_TIME = datetime(2024, 1, 20, 8, 35, 17, 342000, tzinfo=UTC)


@pytest.fixture
def post_segment(acme, post_json):
    def post(body, *, auth: str | None = None, **extra):
        return post_json("/segment", body, auth=auth or segment_auth(acme.key.key), **extra)

    return post


def test_identify_is_applied_like_v2_identify(acme, post_segment, drain):
    response = post_segment(load_fixture("segment/identify.json"))

    assert response.status_code == 202
    assert response.content == b""
    drain()
    user = User.objects.get(product=acme.product, tracking_id="user1234")
    assert user.identified is True
    assert user.email == "ann@acme.test"
    assert user.traits == {
        "email": "ann@acme.test",
        "name": "Ann Example",
        "createdAt": "2018-01-01T00:00:00.000Z",
        "role": "admin",
    }


def test_group_creates_the_account_with_traits_and_links_the_user(acme, post_segment, drain):
    response = post_segment(load_fixture("segment/group.json"))

    assert response.status_code == 202
    drain()
    account = Account.objects.get(product=acme.product, tracking_id="group123")
    assert account.identified is True
    assert account.traits == {
        "mrr": 10,
        "plan": "starter",
        "status": "trial",
        "createdAt": "2018-01-01T00:00:00.000Z",
        "name": "Group X",
    }
    assert Membership.objects.filter(account=account, user__tracking_id="user1234").exists()


def test_track_counts_for_the_account_in_context_group_id(acme, post_segment, drain):
    response = post_segment(load_fixture("segment/track.json"))

    assert response.status_code == 202
    drain()
    event = Event.objects.get(product=acme.product)
    assert (event.user.tracking_id, event.account.tracking_id, event.name) == (
        "user1234",
        "group123",
        "Report_Created",
    )
    # The message carries receivedAt: its pipeline already corrected the time, we keep it.
    assert event.timestamp == MESSAGE_TIME


def test_track_with_a_top_level_group_id_counts_for_that_account(acme, post_segment, drain):
    post_segment(track("user1234", "Export_Run", groupId="group777"))

    drain()
    assert Event.objects.get(product=acme.product).account.tracking_id == "group777"


@pytest.mark.parametrize(
    ("fixture", "event_name"),
    [
        ("segment/page.json", "Viewed Pricing Page"),
        ("segment/screen.json", "Viewed Dashboard Screen"),
    ],
)
def test_page_and_screen_become_viewed_events(acme, post_segment, drain, fixture, event_name):
    response = post_segment(load_fixture(fixture))

    assert response.status_code == 202
    drain()
    event = Event.objects.get(product=acme.product)
    assert (event.user.tracking_id, event.name, event.timestamp) == (
        "user1234",
        event_name,
        MESSAGE_TIME,
    )


@pytest.mark.parametrize(
    ("kind", "event_name"), [("page", "Viewed Page"), ("screen", "Viewed Screen")]
)
def test_page_and_screen_without_a_name(acme, post_segment, drain, kind, event_name):
    response = post_segment({"type": kind, "userId": "user1234", "properties": {"a": 1}})

    assert response.status_code == 202
    drain()
    assert list(Event.objects.values_list("name", flat=True)) == [event_name]


def test_segment_fields_the_service_does_not_use_are_never_stored(acme, post_segment):
    post_segment(load_fixture("segment/track.json"))

    stored = AcceptedRequest.objects.get().messages
    assert stored == [
        {
            "type": "track",
            "timestamp": int(MESSAGE_TIME.timestamp() * 1000),
            "userId": "user1234",
            "event": "Report_Created",
            "groupId": "group123",
            "messageId": "ajs-next-track-31c4e0",
        }
    ]


def test_an_unknown_type_is_accepted_then_dropped_with_its_reason(acme, post_segment, drain):
    response = post_segment({**load_fixture("segment/alias.json"), "type": "log"})

    assert response.status_code == 202
    drain()
    drop = DroppedRequest.objects.get()
    assert (drop.product, drop.endpoint, drop.reason) == (
        acme.product,
        "segment",
        "unsupported_type",
    )
    assert "log" in drop.detail
    assert not User.objects.exists()


def test_identify_traits_in_context_as_rudderstack_sends_them(acme, post_segment, drain):
    post_segment({"type": "identify", "userId": "user1234", "context": {"traits": {"plan": "pro"}}})

    drain()
    assert User.objects.get(tracking_id="user1234").traits == {"plan": "pro"}


@pytest.mark.parametrize("style", ["raw", "base64"])
def test_both_basic_forms_authenticate(acme, post_segment, drain, style):
    auth = acme.basic if style == "raw" else segment_auth(acme.key.key)

    response = post_segment(track("user1234", "Signed_In"), auth=auth)

    assert response.status_code == 202
    drain()
    assert Event.objects.filter(product=acme.product).count() == 1


def test_write_key_in_the_body_authenticates(acme, post_json, drain):
    response = post_json("/segment", track("user1234", "Signed_In", writeKey=acme.key.key))

    assert response.status_code == 202
    drain()
    assert Event.objects.filter(product=acme.product).count() == 1


def test_no_key_at_all_is_401_with_an_error_body(acme, post_json):
    response = post_json("/segment", track("user1234", "Signed_In"))

    assert response.status_code == 401
    assert response.json()["code"] == "missing_authorization"
    assert response.json()["message"]
    assert not AcceptedRequest.objects.exists()


def test_a_malformed_authorization_header_is_401(acme, post_segment):
    response = post_segment(track("user1234", "Signed_In"), auth="Bearer something")

    assert response.status_code == 401
    assert response.json()["code"] == "invalid_authorization"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"type": "track", "event": "Signed_In"}, "userId"),
        ({"type": "track", "userId": "user1234"}, "event"),
        ({"type": "track", "userId": "", "event": "Signed_In"}, "userId"),
        ({"type": "group", "userId": "user1234"}, "groupId"),
        ({"type": "identify", "userId": "user1234", "traits": ["plan"]}, "traits"),
        ({"type": "identify", "userId": 42}, "userId"),
        ({"type": "track", "userId": "u", "event": "E", "timestamp": "yesterday"}, "timestamp"),
        ({"type": "track", "userId": "u", "event": "E", "messageId": 7}, "messageId"),
        ({"type": "page", "userId": "u", "name": {"x": 1}}, "name"),
        ({"userId": "u", "event": "E"}, "type"),
    ],
)
def test_a_message_breaking_the_field_rules_is_400_naming_the_field(post_segment, body, field):
    response = post_segment(body)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_fields"
    assert field in response.json()["fields"]
    assert not AcceptedRequest.objects.exists()


@pytest.mark.parametrize(
    ("body", "code"), [("{not json", "invalid_json"), ("[1, 2]", "invalid_body")]
)
def test_a_body_that_is_not_a_json_object_is_400(post_segment, body, code):
    response = post_segment(body)

    assert response.status_code == 400
    assert response.json()["code"] == code


def test_a_message_above_32_kib_is_413(post_segment):
    response = post_segment(track("user1234", "Big", properties={"blob": "x" * 33 * 1024}))

    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


def test_other_methods_are_405(api_client):
    assert api_client.get("/segment").status_code == 405


def test_503_with_retry_after_when_the_backlog_is_over_its_limit(post_segment, settings):
    settings.INGESTION_BACKLOG_LIMIT = 1
    AcceptedRequest.objects.create(
        received_at=datetime.now(UTC), endpoint="segment", key_digest="x", messages=[]
    )
    store.backlog_refresh()

    response = post_segment(track("user1234", "Signed_In"))

    assert response.status_code == 503
    assert response["Retry-After"] == str(settings.INGESTION_RETRY_AFTER_SECONDS)
    assert response.json()["code"] == "service_unavailable"


def test_segment_and_v2_track_end_in_the_same_state(acme, globex, post_json, drain):
    body = {"userId": "user1234", "event": "Report_Created", "timestamp": "2025-01-01T00:00:00Z"}
    body["context"] = {"groupId": "group123"}
    post_json("/v2/track", body, auth=acme.basic)
    post_json("/segment", {"type": "track", **body}, auth=segment_auth(globex.key.key))

    drain()

    def state(tenant):
        return list(
            Event.objects.filter(product=tenant.product).values_list(
                "user__tracking_id", "account__tracking_id", "name", "timestamp"
            )
        )

    assert state(acme) == state(globex) != []
