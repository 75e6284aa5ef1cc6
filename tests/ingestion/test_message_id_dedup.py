"""A messageId seen before (per product, within INGESTION_DEDUP_DAYS) is applied once."""

from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from engagement import services as engagement_services
from engagement.models import Event, EventRollup, User
from ingestion import tasks
from ingestion.models import AcceptedRequest, DroppedRequest, SeenMessage
from ingestion.services.dedup import seen_messages_claim
from tests.conftest import make_tenant
from tests.ingestion.concurrency import second_waits_on_first
from tests.ingestion.segment_support import iso_now, segment_auth, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


@pytest.fixture
def post_batch(acme, post_json):
    def post(items, *, tenant=None, path: str = "/v1/batch"):
        key = (tenant or acme).key.key
        response = post_json(path, {"batch": items, "sentAt": iso_now()}, auth=segment_auth(key))
        assert response.status_code == 200, response.content
        return response

    return post


def events(tenant) -> int:
    return Event.objects.filter(product=tenant.product).count()


def test_a_repeat_within_one_batch_is_applied_once(acme, post_batch, drain):
    post_batch([track("usr_ann", "E", messageId="m-1"), track("usr_ann", "E", messageId="m-1")])

    drain()

    assert events(acme) == 1
    assert EventRollup.objects.get(product=acme.product).count == 1


def test_a_retried_batch_is_applied_once(acme, post_batch, drain):
    """The SDK timed out waiting for our answer and sent the same batch again."""
    items = [track("usr_ann", "E", messageId="m-1"), track("usr_bob", "E", messageId="m-2")]
    post_batch(items)
    post_batch(items)

    drain()

    assert events(acme) == 2
    assert SeenMessage.objects.filter(product=acme.product).count() == 2


def test_a_repeat_in_a_later_drain_is_applied_once(acme, post_batch, drain):
    post_batch([track("usr_ann", "E", messageId="m-1")])
    drain()
    post_batch([track("usr_ann", "E", messageId="m-1"), track("usr_ann", "E", messageId="m-2")])

    drain()

    assert events(acme) == 2


def test_a_repeat_across_endpoints_is_applied_once(acme, post_batch, post_json, drain):
    message = track("usr_ann", "E", messageId="m-1")
    post_json("/segment", message, auth=segment_auth(acme.key.key))
    drain()
    post_batch([message])
    drain()
    post_batch([message], path="/v1/import")
    drain()

    assert events(acme) == 1


def test_a_repeated_identify_does_not_touch_traits_changed_since(acme, post_batch, drain):
    first = {"type": "identify", "userId": "usr_ann", "messageId": "m-1", "traits": {"plan": "a"}}
    first["timestamp"] = "2025-01-01T00:00:00Z"
    post_batch([first])
    post_batch(
        [
            {
                **first,
                "messageId": "m-2",
                "traits": {"plan": "b"},
                "timestamp": "2025-01-02T00:00:00Z",
            }
        ]
    )
    drain()
    post_batch([first])

    drain()

    assert User.objects.get(tracking_id="usr_ann").traits == {"plan": "b"}


def test_message_ids_are_per_product(acme, globex, post_batch, drain):
    post_batch([track("usr_ann", "E", messageId="m-1")])
    post_batch([track("usr_ann", "E", messageId="m-1")], tenant=globex)

    drain()

    assert (events(acme), events(globex)) == (1, 1)


def test_messages_without_a_message_id_are_never_deduplicated(acme, post_batch, drain):
    post_batch([track("usr_ann", "E"), track("usr_ann", "E")])

    drain()

    assert events(acme) == 2


def test_a_failed_apply_does_not_mark_ids_seen(acme, post_batch, drain, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("a bug in applying")

    monkeypatch.setattr(engagement_services, "messages_apply", broken)
    post_batch([track("usr_ann", "E", messageId="m-1")])
    drain()
    assert DroppedRequest.objects.get().reason == "apply_failed"
    assert not SeenMessage.objects.exists()

    monkeypatch.undo()
    post_batch([track("usr_ann", "E", messageId="m-1")])
    drain()

    assert events(acme) == 1


def test_a_database_failure_leaves_the_batch_and_marks_nothing(
    acme, post_batch, drain, monkeypatch
):
    def unreachable(**kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(engagement_services, "messages_apply", unreachable)
    post_batch([track("usr_ann", "E", messageId="m-1")])
    with pytest.raises(OperationalError):
        drain()
    assert AcceptedRequest.objects.count() == 1
    assert not SeenMessage.objects.exists()

    monkeypatch.undo()
    drain()

    assert events(acme) == 1
    assert SeenMessage.objects.filter(message_id="m-1").exists()


def test_seen_ids_are_forgotten_after_the_dedup_window(acme, post_batch, drain, settings):
    settings.INGESTION_DEDUP_DAYS = 7
    post_batch([track("usr_ann", "E", messageId="old")])
    post_batch([track("usr_ann", "E", messageId="recent")])
    drain()
    SeenMessage.objects.filter(message_id="old").update(seen_at=timezone.now() - timedelta(days=8))
    SeenMessage.objects.filter(message_id="recent").update(
        seen_at=timezone.now() - timedelta(days=6)
    )

    assert tasks.purge_seen_messages() == 1

    post_batch([track("usr_ann", "E", messageId="old"), track("usr_ann", "E", messageId="recent")])
    drain()
    assert events(acme) == 3  # "old" applied again, "recent" still a repeat


@pytest.mark.postgresql  # B waits on A's row lock; SQLite locks the whole database instead
@pytest.mark.django_db(transaction=True)
def test_two_workers_claiming_one_id_apply_it_once():
    """Worker A claims an id and has not committed; worker B claims the same id, waits for A,
    and finds it taken. Had A rolled back, B would have claimed it."""
    product_id = make_tenant("Initech").product.id

    a, b = second_waits_on_first(
        lambda: seen_messages_claim(product_id=product_id, message_ids=["m-1", "m-2"]),
        lambda: seen_messages_claim(product_id=product_id, message_ids=["m-2", "m-3"]),
    )

    assert (a, b) == ({"m-1", "m-2"}, {"m-3"})
