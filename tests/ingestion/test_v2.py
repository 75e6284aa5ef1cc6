"""POST /v2/identify, /v2/group, /v2/track: what a v2 client sends ends up stored."""

import base64
from datetime import UTC, datetime

import pytest

from engagement.models import Account, Event, EventRollup, Membership, User
from ingestion.models import AcceptedRequest
from tests.ingestion.conftest import load_fixture

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def test_identify_creates_the_user_with_traits_and_links_the_account(acme, post_json, drain):
    response = post_json("/v2/identify", load_fixture("v2/identify.json"), auth=acme.basic)

    assert response.status_code == 202
    assert response.content == b""
    drain()
    ann = User.objects.get(product=acme.product, tracking_id="usr_123")
    assert ann.identified is True
    assert ann.email == "ann@acme.example"
    assert ann.traits == {
        "email": "ann@acme.example",
        "name": "Ann",
        "createdAt": "2024-03-01T09:00:00Z",
        "role": "admin",
    }
    account = Account.objects.get(product=acme.product, tracking_id="proj_123")
    assert Membership.objects.filter(user=ann, account=account).exists()


def test_group_creates_the_account_with_traits(acme, post_json, drain):
    response = post_json("/v2/group", load_fixture("v2/group.json"), auth=acme.basic)

    assert response.status_code == 202
    drain()
    account = Account.objects.get(product=acme.product, tracking_id="proj_123")
    assert account.identified is True
    assert account.traits["plan"] == "pro"
    assert account.traits["mrr"] == 4900
    ann = User.objects.get(product=acme.product, tracking_id="usr_123")
    assert list(ann.memberships.values_list("account__tracking_id", flat=True)) == ["proj_123"]


def test_track_stores_the_event_for_the_context_account_and_rolls_it_up(acme, post_json, drain):
    response = post_json("/v2/track", load_fixture("v2/track.json"), auth=acme.basic)

    assert response.status_code == 202
    drain()
    event = Event.objects.get(product=acme.product)
    assert (event.user.tracking_id, event.account.tracking_id, event.name) == (
        "usr_123",
        "proj_123",
        "Task_Completed",
    )
    assert event.timestamp == datetime(2025, 1, 1, tzinfo=UTC)
    rollup = EventRollup.objects.get(product=acme.product)
    assert (rollup.event_name, str(rollup.day), rollup.count) == ("Task_Completed", "2025-01-01", 1)


@pytest.mark.parametrize(
    "credential",
    [
        pytest.param(lambda key: key, id="raw key"),
        pytest.param(lambda key: base64.b64encode(f"{key}:".encode()).decode(), id="base64 key:"),
    ],
)
def test_both_basic_header_forms_authenticate(acme, post_json, drain, credential):
    response = post_json(
        "/v2/track",
        {"userId": "usr_1", "event": "Report_Created"},
        auth=f"Basic {credential(acme.key.key)}",
    )

    assert response.status_code == 202
    drain()
    assert Event.objects.filter(product=acme.product, name="Report_Created").count() == 1


def test_timestamp_defaults_to_now(acme, post_json, drain):
    before = datetime.now(UTC)
    post_json("/v2/track", {"userId": "usr_1", "event": "Report_Created"}, auth=acme.basic)
    drain()

    event = Event.objects.get(product=acme.product)
    assert before.replace(microsecond=0) <= event.timestamp <= datetime.now(UTC)


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("2025-01-01T10:00:00Z", datetime(2025, 1, 1, 10, tzinfo=UTC)),
        ("2025-01-01T12:00:00+02:00", datetime(2025, 1, 1, 10, tzinfo=UTC)),
        ("2025-01-01T10:00:00", datetime(2025, 1, 1, 10, tzinfo=UTC)),
        ("2025-01-01T10:00:00.250Z", datetime(2025, 1, 1, 10, 0, 0, 250000, tzinfo=UTC)),
        (1735725600000, datetime(2025, 1, 1, 10, tzinfo=UTC)),
    ],
)
def test_timestamps_are_iso_8601_or_unix_milliseconds(acme, post_json, drain, sent, stored):
    post_json(
        "/v2/track",
        {"userId": "usr_1", "event": "Report_Created", "timestamp": sent},
        auth=acme.basic,
    )
    drain()

    assert Event.objects.get(product=acme.product).timestamp == stored


def test_a_user_may_belong_to_several_accounts(acme, post_json, drain):
    for group in ("acct_a", "acct_b"):
        post_json("/v2/group", {"groupId": group, "userId": "usr_1"}, auth=acme.basic)
    drain()

    user = User.objects.get(product=acme.product, tracking_id="usr_1")
    assert sorted(user.memberships.values_list("account__tracking_id", flat=True)) == [
        "acct_a",
        "acct_b",
    ]


def test_event_without_context_counts_for_the_most_recently_linked_account(acme, post_json, drain):
    post_json(
        "/v2/group",
        {"groupId": "acct_old", "userId": "usr_1", "timestamp": "2025-01-01T00:00:00Z"},
        auth=acme.basic,
    )
    post_json(
        "/v2/group",
        {"groupId": "acct_new", "userId": "usr_1", "timestamp": "2025-01-02T00:00:00Z"},
        auth=acme.basic,
    )
    drain()
    post_json(
        "/v2/track",
        {"userId": "usr_1", "event": "Report_Created", "timestamp": "2025-01-03T00:00:00Z"},
        auth=acme.basic,
    )
    drain()

    assert Event.objects.get(product=acme.product).account.tracking_id == "acct_new"


def test_track_before_identify_keeps_the_event_and_the_user_is_not_yet_identified(
    acme, post_json, drain
):
    post_json("/v2/track", {"userId": "usr_new", "event": "Report_Created"}, auth=acme.basic)
    drain()
    user = User.objects.get(product=acme.product, tracking_id="usr_new")
    assert user.identified is False
    assert user.events.count() == 1

    post_json("/v2/identify", {"userId": "usr_new", "traits": {"name": "Nia"}}, auth=acme.basic)
    drain()
    user.refresh_from_db()
    assert user.identified is True
    assert user.events.count() == 1


def test_properties_context_and_ip_are_never_stored(
    acme, post_json, drain, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        response = post_json(
            "/v2/track",
            load_fixture("v2/track_with_properties.json"),
            auth=acme.basic,
            REMOTE_ADDR="203.0.113.7",
        )
    assert response.status_code == 202

    stored = AcceptedRequest.objects.get()
    assert stored.messages == [
        {
            "type": "track",
            "timestamp": 1735689605000,
            "userId": "usr_123",
            "event": "Report_Created",
            "groupId": "proj_123",
        }
    ]
    serialized = str(stored.__dict__)
    for secret in ("do not store", "203.0.113.7", "Mozilla", "report_id", "en-US"):
        assert secret not in serialized
    drain()
    event = Event.objects.get()
    assert {f.name for f in Event._meta.fields} == {
        "id",
        "product",
        "user",
        "account",
        "name",
        "timestamp",
    }
    assert event.user.traits == {}


def test_tenants_are_kept_apart(acme, globex, post_json, drain):
    post_json("/v2/identify", {"userId": "usr_1", "traits": {"name": "Ann"}}, auth=acme.basic)
    post_json("/v2/identify", {"userId": "usr_1", "traits": {"name": "Gus"}}, auth=globex.basic)
    drain()

    assert User.objects.get(product=acme.product).traits == {"name": "Ann"}
    assert User.objects.get(product=globex.product).traits == {"name": "Gus"}


def test_trailing_slash_is_accepted(acme, post_json, drain):
    response = post_json("/v2/track/", {"userId": "usr_1", "event": "A"}, auth=acme.basic)

    assert response.status_code == 202


def test_integers_beyond_64_bits_keep_every_digit_through_the_worker(acme, post_json, drain):
    big = 123456789012345678901234567890
    for traits in ({"seats": big}, {"seats": big, "plan": "pro"}):  # a second merge reads it back
        body = {"userId": "usr_big", "traits": traits, "timestamp": 1793527200000}
        assert post_json("/v2/identify", body, auth=acme.basic).status_code == 202
        drain()
    user = User.objects.get(product=acme.product, tracking_id="usr_big")
    assert user.traits == {"seats": big, "plan": "pro"}
    assert isinstance(user.traits["seats"], int)
