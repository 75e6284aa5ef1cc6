"""POST /v1/users, /v1/groups, /v1/events: the legacy body-key, snake_case, millisecond API."""

from datetime import UTC, datetime

import pytest

from engagement.models import Account, Event, User
from tests.ingestion.conftest import load_fixture

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def test_v1_users_identifies_with_the_key_in_the_body(acme, post_json, drain):
    response = post_json("/v1/users", load_fixture("v1/users.json", api_key=acme.key.key))

    assert response.status_code == 202
    assert response.content == b""
    drain()
    user = User.objects.get(product=acme.product, tracking_id="u1")
    assert user.identified is True
    assert user.traits == {"name": "Ann", "email": "ann@acme.example", "created_at": 1717200000000}
    assert user.memberships.get().account.tracking_id == "g1"
    assert user.trait_times["name"] == 1749789914400


def test_v1_groups_creates_the_account(acme, post_json, drain):
    response = post_json("/v1/groups", load_fixture("v1/groups.json", api_key=acme.key.key))

    assert response.status_code == 202
    drain()
    account = Account.objects.get(product=acme.product, tracking_id="g1")
    assert account.traits == {"name": "Acme", "plan": "starter", "mrr": 1900}
    assert account.memberships.get().user.tracking_id == "u1"


def test_v1_events_uses_millisecond_timestamps(acme, post_json, drain):
    response = post_json("/v1/events", load_fixture("v1/events.json", api_key=acme.key.key))

    assert response.status_code == 202
    drain()
    event = Event.objects.get(product=acme.product)
    assert event.name == "Report_Created"
    assert event.timestamp == datetime(2025, 6, 13, 4, 45, 14, 400000, tzinfo=UTC)


def test_v1_accepts_iso_timestamps_as_older_documentation_allowed(acme, post_json, drain):
    body = load_fixture("v1/events_iso_timestamp.json", api_key=acme.key.key)
    response = post_json("/v1/events", body)

    assert response.status_code == 202
    drain()
    event = Event.objects.get(product=acme.product)
    assert event.timestamp == datetime(2025, 6, 13, 4, 45, 14, 400000, tzinfo=UTC)


def test_v1_needs_no_authorization_header_and_ignores_one(acme, globex, post_json, drain):
    body = load_fixture("v1/events.json", api_key=acme.key.key)
    response = post_json("/v1/events", body, auth=globex.basic)

    assert response.status_code == 202
    drain()
    assert Event.objects.filter(product=acme.product).count() == 1
    assert Event.objects.filter(product=globex.product).count() == 0


def test_v1_api_key_is_not_stored_in_the_acceptance_store(
    acme, post_json, django_capture_on_commit_callbacks
):
    from ingestion.models import AcceptedRequest

    with django_capture_on_commit_callbacks(execute=False):
        post_json("/v1/events", load_fixture("v1/events.json", api_key=acme.key.key))

    stored = AcceptedRequest.objects.get()
    assert acme.key.key not in str(stored.messages)
    assert stored.key_digest != acme.key.key
