"""The messageId rule is written twice, in Python for loaded messages and in SQL for messages
staged in PostgreSQL (see ingestion/services/dedup.py). The same cases go through both, and the
SQL route's two claim statements (a plain insert first; the one that skips seen ids after a
repeat): each keeps the same messages and leaves the same ids seen."""

from datetime import UTC, datetime

import pytest
from django.db import connection, transaction

from engagement.track_staging import StagedTracks
from ingestion.acceptance.messages import drop_marker
from ingestion.models import AcceptedRequest, SeenMessage
from ingestion.services import dedup
from ingestion.services.dedup import (
    seen_message_sender_hash,
    seen_messages_claim,
    unseen_messages,
)
from ingestion.services.queue import ClaimedRequest
from ingestion.services.staging import messages_stage
from tests.conftest import make_tenant
from tests.ingestion.concurrency import second_waits_on_first

pytestmark = pytest.mark.postgresql  # the SQL route needs PostgreSQL


def track(event: str, message_id: str | None = None) -> dict:
    message = {"type": "track", "timestamp": 1793527200000, "userId": "usr_ann", "event": event}
    if message_id is not None:
        message["messageId"] = message_id
    return message


# (what, requests in the order they were accepted, ids the product saw in an earlier drain,
#  ids another product saw, the events kept)
CASES = [
    ("a repeat within a request", [[track("A", "m-1"), track("B", "m-1")]], [], [], ["A"]),
    (
        "a repeat in a later request of the same drain",
        [[track("A", "m-1")], [track("B", "m-1"), track("C", "m-2")]],
        [],
        [],
        ["A", "C"],
    ),
    (
        "an id seen in an earlier drain",
        [[track("A", "m-1"), track("B", "m-2")]],
        ["m-1"],
        [],
        ["B"],
    ),
    ("messages without an id", [[track("A"), track("A")]], [], [], ["A", "A"]),
    ("an id another product saw", [[track("A", "m-1")]], [], ["m-1"], ["A"]),
    (
        "drop markers are not messages",
        [[drop_marker("invalid_message", "bad", index=0), track("A", "m-1")]],
        [],
        [],
        ["A"],
    ),
]


def _python_route(product_id: int, requests: list[list[dict]]) -> list[str]:
    messages = [message for request in requests for message in request]
    return [message["event"] for message in unseen_messages(product_id, messages)]


def _stage(product_id: int, requests: list[list[dict]]) -> list[dict]:
    claimed = []
    for messages in requests:
        row = AcceptedRequest.objects.create(
            received_at=datetime.now(UTC), endpoint="v1/batch", key_digest="k", messages=messages
        )
        claimed.append(
            ClaimedRequest(row.id, row.received_at, row.endpoint, row.key_digest, 0, None)
        )
    others, _ = messages_stage(product_id, claimed, None)
    return others


def _staged_events() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT event_name FROM {StagedTracks.TABLE}")  # noqa: S608
        return [name for (name,) in cursor.fetchall()]


def _sql_route(product_id: int, requests: list[list[dict]]) -> list[str]:
    assert _stage(product_id, requests) == []
    return _staged_events()


def _sql_route_after_a_repeat(product_id: int, requests: list[list[dict]]) -> list[str]:
    """The SQL route as a drain takes it for a while after a claim met an id already seen."""
    dedup._claim_route.skipping_claims_left = 3
    events = _sql_route(product_id, requests)
    assert dedup._claim_route.skipping_claims_left == 2
    return events


@pytest.fixture(autouse=True)
def _claim_route_of_a_new_process(monkeypatch):
    monkeypatch.setattr(dedup._claim_route, "skipping_claims_left", 0)


@pytest.mark.parametrize(
    "route",
    [_python_route, _sql_route, _sql_route_after_a_repeat],
    ids=["python", "sql", "sql-after-a-repeat"],
)
@pytest.mark.parametrize(
    ("requests", "seen", "seen_elsewhere", "kept"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_both_routes_keep_the_same_messages(
    acme, globex, route, requests, seen, seen_elsewhere, kept
):
    seen_messages_claim(product_id=acme.product.id, message_ids=seen)
    seen_messages_claim(product_id=globex.product.id, message_ids=seen_elsewhere)

    with transaction.atomic():
        events = route(acme.product.id, requests)

    assert sorted(events) == sorted(kept)
    ids = {m.get("messageId") for request in requests for m in request} - {None}
    assert (
        set(SeenMessage.objects.filter(product=acme.product).values_list("message_id", flat=True))
        == ids
    )


def test_both_routes_keep_each_ids_sender_as_the_same_keyed_hashes(acme, globex):
    """The user of every message, and the account of a group call (not of a track that names
    one), with any characters; what an erasure looks for."""
    user, account = "usr_ännä", "acct-ø"
    base = {"timestamp": 1793527200000, "userId": user}
    messages = [
        {**base, "type": "identify", "traits": {}, "messageId": "m-1"},
        {**base, "type": "group", "groupId": account, "traits": {}, "messageId": "m-2"},
        {**base, "type": "track", "event": "A", "groupId": account, "messageId": "m-3"},
        {"type": "group", "timestamp": 1793527200000, "groupId": account, "messageId": "m-4"},
    ]

    with transaction.atomic():
        unseen_messages(acme.product.id, messages)
        _stage(globex.product.id, [messages])

    for tenant in (acme, globex):
        user_hash = seen_message_sender_hash(tenant.product.id, user)
        account_hash = seen_message_sender_hash(tenant.product.id, account)
        rows = SeenMessage.objects.filter(product=tenant.product).order_by("message_id")
        assert list(rows.values_list("message_id", "user_hash", "account_hash")) == [
            ("m-1", user_hash, None),
            ("m-2", user_hash, account_hash),
            ("m-3", user_hash, None),
            ("m-4", None, account_hash),
        ]
    assert seen_message_sender_hash(acme.product.id, user) != user_hash  # per product


def test_after_a_claim_meets_a_seen_id_the_next_claims_skip_seen_ids_then_try_plain_again(acme):
    seen_messages_claim(product_id=acme.product.id, message_ids=["m-1"])

    with transaction.atomic():
        assert _sql_route(acme.product.id, [[track("A", "m-1"), track("B", "m-2")]]) == ["B"]
    assert dedup._claim_route.skipping_claims_left == dedup._CLAIMS_SKIPPING_AFTER_A_REPEAT
    for number in range(dedup._CLAIMS_SKIPPING_AFTER_A_REPEAT + 1):
        with transaction.atomic():
            assert _sql_route(acme.product.id, [[track("C", f"n-{number}")]]) == ["C"]

    assert dedup._claim_route.skipping_claims_left == 0
    assert SeenMessage.objects.filter(product=acme.product).count() == 19


@pytest.mark.django_db(transaction=True)
def test_two_drains_staging_one_id_apply_it_once():
    """Drain A claims m-1 and m-2 and has not committed; drain B stages m-2 and m-3, waits on
    A's claim of m-2 and, once A commits, keeps m-3 alone. Had A rolled back, B would have
    kept both."""
    tenant = make_tenant("Initech")

    a, b = second_waits_on_first(
        lambda: _sql_route(tenant.product.id, [[track("A1", "m-1"), track("A2", "m-2")]]),
        lambda: _sql_route(tenant.product.id, [[track("B2", "m-2"), track("B3", "m-3")]]),
    )

    assert (sorted(a), b) == (["A1", "A2"], ["B3"])
    assert SeenMessage.objects.filter(product=tenant.product).count() == 3
