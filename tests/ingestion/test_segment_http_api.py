"""Segment's HTTP tracking API (/v1/identify, /v1/track, ... and analytics.js's /v1/i, /v1/t, ...),
as analytics-next sends it: text/plain bodies, the key as Basic or `writeKey`, and anonymous calls
(an anonymousId, no userId) counted per key and day, never a row each in the drop log."""

import json

import pytest

from engagement.models import Account, Event, Membership, User
from ingestion.models import AcceptedRequest, AnonymousDay, DroppedRequest
from tests.ingestion.segment_support import iso_now, segment_auth

pytestmark = pytest.mark.both_databases


@pytest.fixture
def send(acme, api_client):
    """POST a body as analytics.js does: JSON text, `Content-Type: text/plain`."""

    def post(path: str, body: dict, *, auth: str | None = "basic", content_type="text/plain"):
        extra = {}
        if auth == "basic":
            extra["HTTP_AUTHORIZATION"] = segment_auth(acme.key.key)
        return api_client.generic(
            "POST", path, json.dumps(body), content_type=content_type, **extra
        )

    return post


@pytest.mark.parametrize("path", ["/v1/track", "/v1/t"])
def test_a_track_is_answered_as_segment_does_and_counted(acme, send, drain, path):
    response = send(path, {"userId": "ann", "event": "Report Created", "timestamp": iso_now()})

    assert (response.status_code, response.json()) == (200, {"success": True})
    drain()
    event = Event.objects.get(product=acme.product)
    assert (event.user.tracking_id, event.name) == ("ann", "Report Created")


@pytest.mark.parametrize("path", ["/v1/identify", "/v1/i"])
def test_identify_with_the_write_key_in_the_body(acme, send, drain, path):
    body = {"userId": "ann", "traits": {"email": "ann@acme.test"}, "writeKey": acme.key.key}

    response = send(path, body, auth=None)

    assert response.status_code == 200
    drain()
    assert User.objects.get(product=acme.product, tracking_id="ann").email == "ann@acme.test"


@pytest.mark.parametrize("path", ["/v1/group", "/v1/g"])
def test_group_links_the_user_to_the_account(acme, send, drain, path):
    response = send(path, {"userId": "ann", "groupId": "acme-co", "traits": {"plan": "pro"}})

    assert response.status_code == 200
    drain()
    account = Account.objects.get(product=acme.product, tracking_id="acme-co")
    assert account.traits == {"plan": "pro"}
    assert Membership.objects.filter(account=account, user__tracking_id="ann").exists()


@pytest.mark.parametrize(
    ("path", "name"), [("/v1/p", "Viewed Home Page"), ("/v1/s", "Viewed Home Screen")]
)
def test_page_and_screen_become_viewed_events(acme, send, drain, path, name):
    send(path, {"userId": "ann", "name": "Home", "properties": {"url": "https://x.test/?q=1"}})

    drain()
    assert Event.objects.get(product=acme.product).name == name


def test_the_path_names_the_type_whatever_the_body_says(acme, send, drain):
    send("/v1/track", {"type": "identify", "userId": "ann", "event": "Exported"})

    drain()
    assert Event.objects.get(product=acme.product).name == "Exported"


def test_a_body_sent_as_json_is_taken_too(acme, send, drain):
    response = send("/v1/t", {"userId": "ann", "event": "E"}, content_type="application/json")

    assert response.status_code == 200


def test_a_message_breaking_the_rules_is_a_400_and_stores_nothing(acme, send):
    response = send("/v1/t", {"userId": "ann"})

    assert response.status_code == 400
    assert response.json()["fields"] == {"event": ["This field is required."]}
    assert not AcceptedRequest.objects.exists()


def test_no_key_at_all_is_a_401(send):
    response = send("/v1/t", {"userId": "ann", "event": "E"}, auth=None)

    assert (response.status_code, response.json()["code"]) == (401, "missing_authorization")


def test_properties_and_context_are_never_stored(acme, send):
    send(
        "/v1/t",
        {
            "userId": "ann",
            "event": "E",
            "properties": {"secret": "s3"},
            "context": {"ip": "203.0.113.9", "userAgent": "UA", "page": {"url": "https://x"}},
        },
    )

    stored = json.dumps(AcceptedRequest.objects.get().messages)
    for kept_out in ("s3", "203.0.113.9", "UA", "https://x"):
        assert kept_out not in stored


@pytest.mark.parametrize("path", ["/v1/alias", "/v1/a"])
def test_an_alias_merges_the_previous_user_into_the_new_one(acme, send, drain, path):
    send("/v1/t", {"userId": "visitor-9", "event": "Signed Up"})
    send("/v1/i", {"userId": "visitor-9", "traits": {"plan": "trial"}})
    drain()

    response = send(path, {"userId": "ann", "previousId": "visitor-9"})
    send("/v1/t", {"userId": "visitor-9", "event": "Exported"})  # in the same drain
    drain()
    send("/v1/t", {"userId": "visitor-9", "event": "Shared"})  # in a later one
    drain()

    assert (response.status_code, response.json()) == (200, {"success": True})
    assert list(User.objects.values_list("tracking_id", flat=True)) == ["ann"]
    ann = User.objects.get()
    assert ann.traits == {"plan": "trial"}
    assert sorted(ann.events.values_list("name", flat=True)) == [
        "Exported",
        "Shared",
        "Signed Up",
    ]
    assert not DroppedRequest.objects.exists()


def test_an_alias_without_previous_id_is_a_400(send):
    response = send("/v1/a", {"userId": "ann"})

    assert response.status_code == 400
    assert response.json()["fields"] == {"previousId": ["This field is required."]}


@pytest.mark.parametrize("path", ["/v1/p", "/v1/t", "/v1/i"])
def test_anonymous_calls_are_counted_per_key_and_day_not_logged(acme, send, drain, path):
    for _ in range(3):
        response = send(path, {"anonymousId": "a-1", "event": "E", "name": "Home"})
        assert (response.status_code, response.json()) == (200, {"success": True})

    drain()
    assert not User.objects.exists()
    assert not DroppedRequest.objects.exists()
    counted = AnonymousDay.objects.filter(product=acme.product)
    assert sum(row.messages for row in counted) == 3
    assert {row.key_fingerprint for row in counted} == {acme.key.fingerprint}


def test_anonymous_items_of_a_batch_are_not_listed_as_rejected(acme, post_json, drain):
    batch = {
        "batch": [
            {"type": "page", "anonymousId": "a-1", "name": "Home"},
            {"type": "track", "userId": "ann", "event": "E"},
        ]
    }

    response = post_json("/v1/batch", batch, auth=segment_auth(acme.key.key))

    assert response.json() == {"success": True}
    drain()
    assert Event.objects.get(product=acme.product).user.tracking_id == "ann"
    assert AnonymousDay.objects.get().messages == 1


def test_the_health_page_shows_anonymous_counts(acme, send, drain, client, django_user_model):
    send("/v1/p", {"anonymousId": "a-1"})
    drain()
    user = django_user_model.objects.create_superuser("root", "root@acme.test", "pw")
    client.force_login(user)

    page = client.get(f"/w/{acme.workspace.id}/health/").content.decode()

    assert 'id="anonymous"' in page
    assert acme.key.fingerprint in page
