"""Traits merge per key, the later message time wins: any order ends in the same state."""

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engagement.models import Account, Membership, User
from engagement.services import Message, messages_apply

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

MESSAGES = [
    Message(
        message_type="identify", timestamp_ms=1_000, user_id="ann", traits={"plan": "free", "x": 1}
    ),
    Message(message_type="identify", timestamp_ms=3_000, user_id="ann", traits={"plan": "pro"}),
    Message(
        message_type="identify", timestamp_ms=2_000, user_id="ann", traits={"plan": "trial", "y": 2}
    ),
    Message(
        message_type="group", timestamp_ms=1_500, group_id="acme", user_id="ann", traits={"n": "A"}
    ),
    Message(message_type="group", timestamp_ms=2_500, group_id="acme", traits={"n": "Acme"}),
    Message(message_type="track", timestamp_ms=1_200, user_id="ann", event="Report_Created"),
    Message(message_type="track", timestamp_ms=900, user_id="bob", event="Report_Created"),
    Message(message_type="identify", timestamp_ms=3_000, user_id="ann", traits={"tie": "b"}),
    Message(message_type="identify", timestamp_ms=3_000, user_id="ann", traits={"tie": "a"}),
]


def state(product_id: int) -> dict:
    return {
        "users": sorted(
            (u.tracking_id, u.traits, u.identified)
            for u in User.objects.filter(product_id=product_id)
        ),
        "accounts": sorted(
            (a.tracking_id, a.traits, a.identified)
            for a in Account.objects.filter(product_id=product_id)
        ),
        "links": sorted(
            Membership.objects.filter(user__product_id=product_id).values_list(
                "user__tracking_id", "account__tracking_id"
            )
        ),
    }


EXPECTED = {
    "users": [
        ("ann", {"plan": "pro", "x": 1, "y": 2, "tie": "b"}, True),
        ("bob", {}, False),
    ],
    "accounts": [("acme", {"n": "Acme"}, True)],
    "links": [("ann", "acme")],
}


def test_one_call_per_message_in_written_order(acme):
    for message in MESSAGES:
        messages_apply(product_id=acme.product.id, messages=[message])
    assert state(acme.product.id) == EXPECTED


def test_reverse_order_one_at_a_time(acme):
    for message in reversed(MESSAGES):
        messages_apply(product_id=acme.product.id, messages=[message])
    assert state(acme.product.id) == EXPECTED


def test_all_in_one_batch(acme):
    messages_apply(product_id=acme.product.id, messages=MESSAGES)
    assert state(acme.product.id) == EXPECTED


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(order=st.permutations(range(len(MESSAGES))), cut=st.integers(0, len(MESSAGES)))
def test_any_order_and_any_batching_ends_in_the_same_state(db, order, cut):
    from django.db import transaction

    from engagement.services import product_create

    with transaction.atomic():  # each example rolls back, so examples cannot see each other
        product, _ = product_create(name="Perm")
        shuffled = [MESSAGES[i] for i in order]
        for batch in (shuffled[:cut], shuffled[cut:]):
            messages_apply(product_id=product.id, messages=batch)
        assert state(product.id) == EXPECTED
        transaction.set_rollback(True)


def test_event_count_does_not_depend_on_order(acme):
    tracks = [m for m in MESSAGES if m.message_type == "track"]
    for permutation in itertools.permutations(tracks):
        messages_apply(product_id=acme.product.id, messages=list(permutation))
    assert User.objects.get(product=acme.product, tracking_id="ann").events.count() == 2
