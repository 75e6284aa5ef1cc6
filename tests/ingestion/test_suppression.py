"""A tracking id erased with suppression: its later messages are dropped at the worker with
reason `suppressed` (on PostgreSQL's staged route and the generic one), other users' messages
are applied, only a keyed hash of the id is kept, and lifting the suppression lets data in."""

import pytest

from engagement.erasure import erasure_request, erasure_run, suppression_lift
from engagement.models import Erasure, Event, Suppression, User, UserAlias
from ingestion.models import DroppedRequest
from tests.ingestion.segment_support import iso_now, segment_auth, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

EVE = "eve-tracking-4410"


@pytest.fixture
def eve_suppressed(acme, post_json, drain):
    assert post_json("/v2/track", {"userId": EVE, "event": "A"}, auth=acme.basic).status_code == 202
    drain()
    eve = User.objects.get(product=acme.product, tracking_id=EVE)
    erasure = erasure_request(
        product_id=acme.product.id,
        kind=Erasure.Kind.USER,
        target_id=eve.id,
        suppress=True,
        via=Erasure.Via.COMMAND,
    )
    erasure_run(erasure_id=erasure.id)
    return Suppression.objects.get(product=acme.product)


def send_batch(post_json, tenant, *items) -> None:
    body = {"batch": list(items), "sentAt": iso_now()}
    assert post_json("/v1/batch", body, auth=segment_auth(tenant.key.key)).status_code == 200


def test_later_messages_for_a_suppressed_id_are_dropped_as_suppressed(
    acme, post_json, drain, eve_suppressed
):
    send_batch(post_json, acme, track(EVE, "B"), track("zed", "B"), track(EVE, "C"))
    drain()

    assert not User.objects.filter(tracking_id=EVE).exists()
    assert User.objects.filter(tracking_id="zed").exists()
    assert Event.objects.filter(product=acme.product).count() == 1
    drop = DroppedRequest.objects.get(reason=DroppedRequest.Reason.SUPPRESSED)
    assert drop.message_count == 2 and drop.product_id == acme.product.id
    assert EVE not in drop.detail
    # Only the keyed hash is kept, never the id itself.
    assert eve_suppressed.tracking_hash != EVE and len(eve_suppressed.tracking_hash) == 64


def test_an_identify_for_a_suppressed_id_is_dropped_too(acme, post_json, drain, eve_suppressed):
    body = {"userId": EVE, "traits": {"email": "eve@x.test"}}
    assert post_json("/v2/identify", body, auth=acme.basic).status_code == 202
    drain()
    assert not User.objects.filter(tracking_id=EVE).exists()
    assert DroppedRequest.objects.filter(reason="suppressed").count() == 1


def test_lifting_the_suppression_lets_data_in_again(acme, post_json, drain, eve_suppressed):
    assert suppression_lift(suppression_id=eve_suppressed.id)
    send_batch(post_json, acme, track(EVE, "B"))
    drain()
    assert User.objects.filter(tracking_id=EVE).exists()


def test_another_product_with_the_same_id_is_not_suppressed(
    acme, globex, post_json, drain, eve_suppressed
):
    send_batch(post_json, globex, track(EVE, "B"))
    drain()
    assert User.objects.filter(product=globex.product, tracking_id=EVE).exists()


@pytest.mark.parametrize("path", ["/v1/batch", "/v1/alias"])
def test_an_alias_naming_a_suppressed_previous_id_is_dropped_and_stores_nothing_of_it(
    acme, post_json, drain, eve_suppressed, path
):
    alias = {"type": "alias", "previousId": EVE, "userId": "eve-new-account", "messageId": "m-a1"}
    body = {"batch": [alias], "sentAt": iso_now()} if path == "/v1/batch" else alias
    assert post_json(path, body, auth=segment_auth(acme.key.key)).status_code == 200
    drain()

    assert not UserAlias.objects.filter(product=acme.product).exists()
    assert not UserAlias.objects.filter(previous_id=EVE).exists()
    assert not User.objects.filter(product=acme.product, tracking_id=EVE).exists()
    drop = DroppedRequest.objects.get(reason=DroppedRequest.Reason.SUPPRESSED)
    assert drop.message_count == 1 and EVE not in drop.detail


def test_an_alias_onto_a_suppressed_id_is_dropped_too(acme, post_json, drain, eve_suppressed):
    send_batch(
        post_json,
        acme,
        {"type": "alias", "previousId": "anon-77", "userId": EVE, "messageId": "m-a2"},
        track("zed", "B"),
    )
    drain()

    assert not UserAlias.objects.filter(product=acme.product).exists()
    assert User.objects.filter(product=acme.product, tracking_id="zed").exists()
    assert DroppedRequest.objects.get(reason="suppressed").message_count == 1
