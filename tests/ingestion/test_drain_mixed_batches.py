"""One drain over requests of every shape at once: tracks (applied from the stored JSON in SQL on
PostgreSQL), identify and group calls (merged in Python), items left out of a batch, repeats."""

import pytest
from django.db import connection

from engagement import services as engagement_services
from engagement.models import Event, EventRollup, Membership, User
from ingestion.models import DroppedRequest, SeenMessage
from tests.ingestion.segment_support import iso_now, segment_auth, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def post_segment_batch(post_json, tenant, items):
    response = post_json(
        "/v1/batch", {"batch": items, "sentAt": iso_now()}, auth=segment_auth(tenant.key.key)
    )
    assert response.status_code == 200, response.content


def test_tracks_identifies_and_dropped_items_in_one_drain(acme, post_json, drain):
    ann_joins_initech = {
        "type": "identify",
        "userId": "usr_ann",
        "traits": {"email": "ann@initech.example", "seats": 12345678901234567890123},
        "groupId": "acc_initech",
        "messageId": "m-identify",
        "timestamp": iso_now(offset_seconds=-60),
    }
    post_segment_batch(
        post_json,
        acme,
        [
            track("usr_ann", "Report_Created", messageId="m-1"),
            {"type": "alias", "userId": "usr_ann", "previousId": "anon-1"},
            track("usr_bob", "Report_Created", messageId="m-2", context={"groupId": "acc_globo"}),
        ],
    )
    post_json("/v2/track", {"userId": "usr_cy", "event": "Invite_Sent"}, auth=acme.basic)
    post_segment_batch(
        post_json,
        acme,
        [ann_joins_initech, track("usr_ann", "Report_Created", messageId="m-1")],
    )

    assert drain() == 3

    ann = User.objects.get(product=acme.product, tracking_id="usr_ann")
    assert ann.identified and ann.traits["seats"] == 12345678901234567890123
    events = {
        (e.user.tracking_id, e.name, e.account.tracking_id if e.account else None)
        for e in Event.objects.select_related("user", "account")
    }
    # usr_ann's track names no account: it counts for the one she was linked to in this drain.
    assert events == {
        ("usr_ann", "Report_Created", "acc_initech"),
        ("usr_bob", "Report_Created", "acc_globo"),
        ("usr_cy", "Invite_Sent", None),
    }
    assert Event.objects.count() == 3  # the repeated m-1 once
    assert sum(EventRollup.objects.values_list("count", flat=True)) == 3
    # usr_bob's track naming acc_globo links him to it, as a group call would.
    assert sorted(Membership.objects.values_list("user__tracking_id", "account__tracking_id")) == [
        ("usr_ann", "acc_initech"),
        ("usr_bob", "acc_globo"),
    ]
    # The alias of anon-1 (no user of its own) is remembered for usr_ann, not dropped.
    assert not DroppedRequest.objects.exists()
    assert list(ann.aliases.values_list("previous_id", flat=True)) == ["anon-1"]
    assert set(SeenMessage.objects.values_list("message_id", flat=True)) == {
        "m-1",
        "m-2",
        "m-identify",
    }


def test_a_drain_of_only_repeats_changes_nothing(acme, post_json, drain):
    items = [track("usr_ann", "E", messageId="m-1")]
    post_segment_batch(post_json, acme, items)
    drain()
    before = list(User.objects.values_list("id", "first_seen_at", "last_seen_at"))

    post_segment_batch(post_json, acme, items)

    assert drain() == 1
    assert Event.objects.count() == 1
    assert EventRollup.objects.get().count == 1
    assert list(User.objects.values_list("id", "first_seen_at", "last_seen_at")) == before


def test_a_repeated_message_id_keeps_its_first_message_whatever_the_repeats_say(
    acme, post_json, drain
):
    post_segment_batch(
        post_json,
        acme,
        [
            track("usr_ann", "First_Sent", messageId="m-1"),
            track("usr_ann", "Same_Request_Repeat", messageId="m-1"),
        ],
    )
    post_segment_batch(post_json, acme, [track("usr_ann", "Later_Request_Repeat", messageId="m-1")])

    assert drain() == 2

    assert list(Event.objects.values_list("name", flat=True)) == ["First_Sent"]
    assert SeenMessage.objects.get().message_id == "m-1"


def test_one_request_that_cannot_be_applied_is_found_by_halving(
    acme, post_json, drain, monkeypatch
):
    applied = engagement_services.messages_apply
    calls = []

    def fails_on_poison(**kwargs):
        calls.append(1)
        if any(m.user_id == "usr_poison" for m in kwargs["messages"]):
            raise RuntimeError("a bug in applying")
        return applied(**kwargs)

    monkeypatch.setattr(engagement_services, "messages_apply", fails_on_poison)
    for n in range(15):
        post_json("/v2/track", {"userId": f"usr_{n}", "event": "E"}, auth=acme.basic)
        if n == 9:
            post_json("/v2/identify", {"userId": "usr_poison"}, auth=acme.basic)

    assert drain() == 16

    assert Event.objects.count() == 15
    drop = DroppedRequest.objects.get()
    assert (drop.reason, drop.endpoint) == ("apply_failed", "v2/identify")
    # All 16 together, then halves of 8, 4, 2 and 1: 9 tries where one per row took 17. On
    # PostgreSQL the request that failed alone (in the SQL route) is tried once more the generic
    # way before its message is dropped.
    assert len(calls) == (10 if connection.vendor == "postgresql" else 9)
    assert (drop.message_count, drop.item_index) == (1, 0)
