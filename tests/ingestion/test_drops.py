"""Every request dropped after its 202 is recorded with its reason; the record is bounded."""

from datetime import timedelta

import pytest
from django.utils import timezone

from engagement.models import Event
from ingestion.models import AcceptedRequest, DroppedRequest
from ingestion.services.drops import drops_purge
from ingestion.services.keys import ingestion_key_create, ingestion_key_revoke
from ingestion.tasks import purge_old_drops

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def test_an_unknown_key_is_accepted_then_dropped_with_its_reason(acme, post_json, drain):
    response = post_json(
        "/v2/track",
        {"userId": "u1", "event": "A", "properties": {"plan": "secret"}},
        auth="Basic not-a-key-of-anyone",
    )

    assert response.status_code == 202
    drain()
    drop = DroppedRequest.objects.get()
    assert (drop.reason, drop.endpoint, drop.product_id) == ("unknown_key", "v2/track", None)
    assert drop.message_count == 1
    assert "secret" not in str(drop.__dict__)
    assert Event.objects.count() == 0


def test_a_v1_unknown_key_is_dropped_too(post_json, drain, db):
    response = post_json("/v1/events", {"user_id": "u1", "event": "A", "api_key": "nope"})

    assert response.status_code == 202
    drain()
    assert DroppedRequest.objects.get().endpoint == "v1/events"


def test_a_revoked_key_is_dropped_naming_the_product(acme, post_json, drain):
    ingestion_key_revoke(key_id=acme.key.id)
    response = post_json("/v2/identify", {"userId": "u1"}, auth=acme.basic)

    assert response.status_code == 202
    drain()
    drop = DroppedRequest.objects.get()
    assert (drop.reason, drop.product_id) == ("revoked_key", acme.product.id)


def test_a_request_accepted_before_its_key_was_revoked_is_still_applied(
    acme, post_json, drain, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        post_json("/v2/track", {"userId": "u1", "event": "A"}, auth=acme.basic)
    ingestion_key_revoke(key_id=acme.key.id)
    drain()

    assert Event.objects.filter(product=acme.product).count() == 1
    assert not DroppedRequest.objects.exists()


def test_several_keys_are_active_at_once_for_rotation(acme, post_json, drain):
    new_key = ingestion_key_create(product_id=acme.product.id, label="rotated")
    post_json("/v2/track", {"userId": "u1", "event": "Old"}, auth=acme.basic)
    post_json("/v2/track", {"userId": "u1", "event": "New"}, auth=f"Basic {new_key.key}")
    drain()

    assert sorted(Event.objects.values_list("name", flat=True)) == ["New", "Old"]


def test_a_drain_across_a_revocation_applies_what_came_before_and_drops_what_came_after(
    acme, post_json, drain
):
    rotated = ingestion_key_create(product_id=acme.product.id, label="rotated")
    post_json("/v2/track", {"userId": "u1", "event": "Before_Revocation"}, auth=acme.basic)
    ingestion_key_revoke(key_id=acme.key.id)
    post_json("/v2/track", {"userId": "u1", "event": "After_Revocation"}, auth=acme.basic)
    post_json("/v2/track", {"userId": "u1", "event": "New_Key"}, auth=f"Basic {rotated.key}")

    assert drain() == 3

    assert sorted(Event.objects.values_list("name", flat=True)) == ["Before_Revocation", "New_Key"]
    drop = DroppedRequest.objects.get()
    assert (drop.reason, drop.product_id) == ("revoked_key", acme.product.id)
    assert not AcceptedRequest.objects.exists()


def test_one_drain_applies_a_known_key_and_drops_an_unknown_one(acme, post_json, drain):
    post_json("/v2/track", {"userId": "u1", "event": "Known"}, auth=acme.basic)
    post_json("/v2/track", {"userId": "u1", "event": "Unknown"}, auth="Basic not-a-key-of-anyone")
    post_json("/v2/track", {"userId": "u2", "event": "Known"}, auth=acme.basic)

    assert drain() == 3

    assert sorted(Event.objects.values_list("name", flat=True)) == ["Known", "Known"]
    drop = DroppedRequest.objects.get()
    assert (drop.reason, drop.product_id, drop.message_count) == ("unknown_key", None, 1)
    assert not AcceptedRequest.objects.exists()


def test_drops_are_kept_for_the_retention_period_only(acme, settings):
    now = timezone.now()
    old = DroppedRequest.objects.create(
        endpoint="v2/track", reason="unknown_key", received_at=now - timedelta(days=40)
    )
    recent = DroppedRequest.objects.create(
        endpoint="v2/track", reason="unknown_key", received_at=now
    )
    DroppedRequest.objects.filter(id=old.id).update(dropped_at=now - timedelta(days=31))
    settings.INGESTION_DROP_RETENTION_DAYS = 30

    assert purge_old_drops() == 1
    assert list(DroppedRequest.objects.values_list("id", flat=True)) == [recent.id]
    assert drops_purge(older_than_days=30) == 0


def test_the_admin_lists_and_filters_drops(acme, admin_client, post_json, drain):
    post_json("/v2/track", {"userId": "u1", "event": "A"}, auth="Basic unknown-key")
    ingestion_key_revoke(key_id=acme.key.id)
    post_json("/v2/track", {"userId": "u1", "event": "A"}, auth=acme.basic)
    drain()

    page = admin_client.get("/admin/ingestion/droppedrequest/")
    assert page.status_code == 200
    assert b"Unknown ingestion key" in page.content
    filtered = admin_client.get("/admin/ingestion/droppedrequest/?reason=revoked_key")
    assert filtered.status_code == 200
    rows = filtered.content.split(b'id="result_list"')[1].split(b"</table>")[0]
    assert b"Revoked ingestion key" in rows
    assert b"Unknown ingestion key" not in rows


def test_a_drop_keeps_the_exact_time_its_request_was_accepted(acme, post_json, drain):
    post_json("/v2/track", {"userId": "u1", "event": "A"}, auth="Basic not-a-key-of-anyone")
    accepted_at = AcceptedRequest.objects.get().received_at
    drain()
    assert DroppedRequest.objects.get().received_at == accepted_at  # to the microsecond


def test_a_drop_is_dated_when_the_worker_made_it(acme, post_json, drain):
    post_json("/v2/track", {"userId": "u1", "event": "A"}, auth="Basic not-a-key-of-anyone")
    before = timezone.now()
    drain()
    assert before <= DroppedRequest.objects.get().dropped_at <= timezone.now()


def test_a_drop_shows_a_fingerprint_of_the_key_it_came_with(acme, post_json, drain):
    # A typo'd key and a revoked one are told apart, and from which deployed app they came,
    # without the drop log holding a key.
    typo = acme.key.key[:-1] + ("x" if acme.key.key[-1] != "x" else "y")
    post_json("/v2/track", {"userId": "u1", "event": "A"}, auth=f"Basic {typo}")
    ingestion_key_revoke(key_id=acme.key.id)
    post_json("/v2/track", {"userId": "u1", "event": "A"}, auth=acme.basic)
    drain()

    drops = {d.reason: d.key_fingerprint for d in DroppedRequest.objects.all()}

    assert drops["revoked_key"] == acme.key.fingerprint
    assert len(drops["unknown_key"]) == 8 and drops["unknown_key"] != acme.key.fingerprint
    assert acme.key.key not in str(list(DroppedRequest.objects.values()))


def test_the_admin_shows_the_fingerprint_a_drop_and_its_key_share(acme, admin_client, drain):
    ingestion_key_revoke(key_id=acme.key.id)
    AcceptedRequest.objects.create(
        received_at=timezone.now(),
        endpoint="v2/track",
        key_digest=acme.key.digest,
        messages=[{"type": "track", "timestamp": 1_750_000_000_000, "userId": "u", "event": "A"}],
    )
    drain()

    drops = admin_client.get("/admin/ingestion/droppedrequest/", {"q": acme.key.fingerprint})
    keys = admin_client.get("/admin/ingestion/ingestionkey/")

    assert drops.status_code == 200 and acme.key.fingerprint in drops.content.decode()
    assert "revoked_key" in drops.content.decode() or "Revoked" in drops.content.decode()
    assert acme.key.fingerprint in keys.content.decode()
