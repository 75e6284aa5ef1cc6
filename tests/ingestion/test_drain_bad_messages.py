"""A message the worker cannot apply is dropped alone: the other messages of its request, and of
the other requests of its row, are applied, in order. (The acceptance rules validate every
message, so such a message means a bug or a value the database refuses; these tests store rows
directly, as the rules never would.)"""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import OperationalError

from engagement import services as engagement_services
from engagement.models import Account, Event, Membership, User
from ingestion import acceptance
from ingestion.models import AcceptedRequest, DroppedRequest, SeenMessage
from ingestion.services.drain import accepted_requests_drain

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

NOW = datetime.now(UTC) - timedelta(seconds=1)
NOW_MS = int(NOW.timestamp() * 1000)
# Python's datetime ends before year 1: an identify's or group's time cannot be read (either
# database); on PostgreSQL a track that early is stored, as a date BC.
BEFORE_YEAR_ONE = -62_135_596_800_001
# Beyond a bigint: PostgreSQL refuses it in the SQL route, Python beyond year 9999.
BEYOND_BIGINT = 10**20


def track(user_id: str, event: str = "Report_Created", **extra) -> dict:
    return {"type": "track", "timestamp": NOW_MS, "userId": user_id, "event": event, **extra}


def identify(user_id: str, **extra) -> dict:
    return {
        "type": "identify",
        "timestamp": NOW_MS,
        "userId": user_id,
        "traits": {"plan": "pro"},
        **extra,
    }


def group(group_id: str, user_id: str) -> dict:
    return {
        "type": "group",
        "timestamp": NOW_MS,
        "groupId": group_id,
        "userId": user_id,
        "traits": {"tier": "gold"},
    }


BAD_IDENTIFY = identify("usr_bad", timestamp=BEFORE_YEAR_ONE)
BAD_TRACK = track("usr_bad", timestamp=BEYOND_BIGINT)
BAD = pytest.mark.parametrize("bad", [BAD_IDENTIFY, BAD_TRACK], ids=["identify", "track"])


def store(tenant, *requests: tuple[str, list[dict]], at: datetime | None = None):
    """One stored row holding these (endpoint, messages) requests, as the store would write it:
    a request alone, or several one after the other with their parts."""
    received_at = at or NOW
    if len(requests) == 1:
        endpoint, messages = requests[0]
        return AcceptedRequest.objects.create(
            received_at=received_at,
            endpoint=endpoint,
            key_digest=tenant.key.digest,
            messages=messages,
        )
    times = [received_at + timedelta(milliseconds=n) for n in range(len(requests))]
    endpoints = {endpoint for endpoint, _ in requests}
    return AcceptedRequest.objects.create(
        received_at=times[-1],
        endpoint=endpoints.pop() if len(endpoints) == 1 else "several",
        key_digest=tenant.key.digest,
        messages=[message for _, messages in requests for message in messages],
        request_count=len(requests),
        requests=[
            [endpoint, round(moment.timestamp() * 1_000_000), len(messages)]
            for (endpoint, messages), moment in zip(requests, times, strict=True)
        ],
    )


def tracked_users() -> list[str]:
    return sorted(Event.objects.values_list("user__tracking_id", flat=True))


def drops() -> list[tuple]:
    return list(
        DroppedRequest.objects.order_by("item_index").values_list(
            "reason", "endpoint", "item_index", "message_count"
        )
    )


@BAD
def test_one_bad_message_of_a_batch_is_dropped_alone(acme, drain, bad):
    store(
        acme,
        (
            "v1/batch",
            [
                track("usr_ann"),
                identify("usr_bo"),
                bad,
                track("usr_cy"),
                group("acc_initech", "usr_bo"),
                track("usr_bo", "Invite_Sent"),
            ],
        ),
    )

    assert drain() == 1

    assert tracked_users() == ["usr_ann", "usr_bo", "usr_cy"]
    assert User.objects.get(tracking_id="usr_bo").traits == {"plan": "pro"}
    assert Account.objects.get(tracking_id="acc_initech").traits == {"tier": "gold"}
    assert Membership.objects.get().user.tracking_id == "usr_bo"
    assert not User.objects.filter(tracking_id="usr_bad").exists()
    assert drops() == [("apply_failed", "v1/batch", 2, 1)]
    drop = DroppedRequest.objects.get()
    assert drop.product_id == acme.product.id
    assert drop.received_at == NOW
    assert f"item 2 ({bad['type']})" in drop.detail.lower()
    assert not AcceptedRequest.objects.exists()


def test_items_left_out_at_the_door_keep_their_places_beside_a_bad_message(acme, drain):
    left_out = acceptance.drop_marker(
        acceptance.DROP_UNSUPPORTED_TYPE, "log is not supported", index=1
    )
    store(acme, ("v1/batch", [track("usr_ann"), left_out, BAD_IDENTIFY, track("usr_cy")]))

    drain()

    assert tracked_users() == ["usr_ann", "usr_cy"]
    assert drops() == [
        ("unsupported_type", "v1/batch", 1, 1),
        ("apply_failed", "v1/batch", 2, 1),
    ]


@BAD
def test_a_bad_message_in_a_row_of_several_requests_is_dropped_alone(acme, drain, bad):
    row = store(
        acme,
        ("v2/track", [track("usr_ann")]),
        ("v1/batch", [track("usr_bo"), bad, track("usr_cy")]),
        ("v2/identify", [identify("usr_dee")]),
    )
    batch_received = datetime.fromtimestamp(row.requests[1][1] / 1_000_000, UTC)

    assert drain() == 3

    assert tracked_users() == ["usr_ann", "usr_bo", "usr_cy"]
    assert User.objects.get(tracking_id="usr_dee").identified
    assert drops() == [("apply_failed", "v1/batch", 1, 1)]
    assert DroppedRequest.objects.get().received_at == batch_received
    assert not AcceptedRequest.objects.exists()


def test_bad_messages_in_several_requests_of_a_drain_are_each_dropped_alone(acme, drain):
    store(acme, ("v2/track", [track("usr_ann")]))
    store(acme, ("v1/batch", [BAD_IDENTIFY, track("usr_bo"), BAD_TRACK, track("usr_cy")]))
    store(acme, ("v2/track", [track("usr_dee")]))
    store(acme, ("v1/import", [track("usr_eve"), track("usr_fay"), BAD_IDENTIFY]))

    assert drain() == 4

    assert tracked_users() == ["usr_ann", "usr_bo", "usr_cy", "usr_dee", "usr_eve", "usr_fay"]
    assert sorted(drops()) == [
        ("apply_failed", "v1/batch", 0, 1),
        ("apply_failed", "v1/batch", 2, 1),
        ("apply_failed", "v1/import", 2, 1),
    ]


def test_a_dropped_message_does_not_mark_its_message_id_seen(acme, drain):
    store(
        acme,
        (
            "v1/batch",
            [
                track("usr_ann", "First", messageId="m-1"),
                identify("usr_bad", timestamp=BEFORE_YEAR_ONE, messageId="m-2"),
                track("usr_bo", messageId="m-3"),
                track("usr_ann", "Repeat", messageId="m-1"),
            ],
        ),
    )

    drain()

    assert sorted(Event.objects.values_list("user__tracking_id", "name")) == [
        ("usr_ann", "First"),
        ("usr_bo", "Report_Created"),
    ]
    assert set(SeenMessage.objects.values_list("message_id", flat=True)) == {"m-1", "m-3"}
    assert drops() == [("apply_failed", "v1/batch", 1, 1)]

    # The sender retries m-2, mended, and repeats m-1: m-2 is applied, m-1 is not.
    store(
        acme,
        ("v1/batch", [identify("usr_bad", messageId="m-2"), track("usr_ann", messageId="m-1")]),
    )
    drain()

    assert User.objects.get(tracking_id="usr_bad").identified
    assert Event.objects.count() == 2
    assert set(SeenMessage.objects.values_list("message_id", flat=True)) == {"m-1", "m-2", "m-3"}


@pytest.mark.postgresql
def test_a_track_postgresql_refuses_is_dropped_alone_from_a_grouped_row(acme, drain):
    """On PostgreSQL tracks go from the stored JSON to the events in SQL; one it refuses (a
    time beyond a bigint) takes the route message by message."""
    store(
        acme,
        ("v2/track", [track("usr_ann")]),
        (
            "v1/batch",
            [track("usr_bo", messageId="m-1"), BAD_TRACK, track("usr_cy", messageId="m-2")],
        ),
    )

    assert drain() == 2

    assert tracked_users() == ["usr_ann", "usr_bo", "usr_cy"]
    assert set(SeenMessage.objects.values_list("message_id", flat=True)) == {"m-1", "m-2"}
    assert drops() == [("apply_failed", "v1/batch", 1, 1)]


def test_database_trouble_while_looking_for_the_bad_message_leaves_the_rows(
    acme, drain, monkeypatch
):
    applied = engagement_services.messages_apply
    calls = []

    def fails_then_loses_the_database(**kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug in applying")
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(engagement_services, "messages_apply", fails_then_loses_the_database)
    store(acme, ("v1/batch", [track("usr_ann", messageId="m-1"), BAD_IDENTIFY, track("usr_bo")]))

    with pytest.raises(OperationalError):
        accepted_requests_drain(limit=1000)

    assert len(calls) == 2
    assert AcceptedRequest.objects.count() == 1
    assert not DroppedRequest.objects.exists()
    assert not SeenMessage.objects.exists()
    monkeypatch.setattr(engagement_services, "messages_apply", applied)
    drain()
    assert tracked_users() == ["usr_ann", "usr_bo"]


def test_a_request_of_good_messages_is_applied_whole(acme, drain, monkeypatch):
    """The happy path: one call for the drain, nothing loaded message by message."""
    applied = engagement_services.messages_apply
    calls = []

    def counted(**kwargs):
        calls.append(1)
        return applied(**kwargs)

    monkeypatch.setattr(engagement_services, "messages_apply", counted)
    store(acme, ("v1/batch", [track(f"usr_{n}") for n in range(50)]))
    store(acme, ("v2/identify", [identify("usr_0")]))

    assert drain() == 2

    assert Event.objects.count() == 50
    assert len(calls) == 1
    assert not DroppedRequest.objects.exists()


def test_a_drain_out_of_tries_drops_the_parts_that_fail_whole(acme, drain, monkeypatch):
    """A bug that fails every message must not hold the drain's transaction open for two tries
    a message: past its tries, a part that fails is dropped as one, and nothing is lost
    unrecorded."""
    monkeypatch.setattr("ingestion.services.apply.MESSAGE_TRIES_PER_DRAIN", 3)
    first = [track("usr_0"), BAD_IDENTIFY] + [track(f"usr_{n}") for n in range(2, 6)]
    store(acme, ("v1/batch", [*first, BAD_IDENTIFY, track("usr_7")]))
    store(acme, ("v1/import", [track("usr_8"), BAD_IDENTIFY, track("usr_9")]))

    assert drain() == 2

    dropped = list(DroppedRequest.objects.values_list("endpoint", "item_index", "message_count"))
    assert set(DroppedRequest.objects.values_list("reason", flat=True)) == {"apply_failed"}
    assert any(count > 1 for _, _, count in dropped)
    covered = {
        (endpoint, index)
        for endpoint, first_index, count in dropped
        for index in range(first_index, first_index + count)
    }
    assert {("v1/batch", 1), ("v1/batch", 6), ("v1/import", 1)} <= covered
    # Every message either applied or in a drop, none both.
    applied = set(Event.objects.values_list("user__tracking_id", flat=True))
    batch = {("v1/batch", n) for n in range(8)} - {("v1/batch", 1), ("v1/batch", 6)}
    assert len(covered) == sum(count for _, _, count in dropped) == 11 - len(applied)
    assert {("v1/batch", int(user[4:])) for user in applied if int(user[4:]) < 8} == (
        batch - covered
    )
    assert not AcceptedRequest.objects.exists()
