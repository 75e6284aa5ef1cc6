"""An erasure forgets the messageIds remembered of its person's messages, whatever the ids look
like (found by their sender's keyed hash), and leaves everyone else's."""

import pytest
from django.utils import timezone

from engagement.erasure import erasure_request, erasure_run
from engagement.models import Account, Erasure, User
from ingestion.models import SeenMessage, seen_message_key
from tests.ingestion.segment_support import iso_now, segment_auth, track

ADA = "ada-ünï-7731"


@pytest.fixture
def sent(acme, post_json, drain):
    """Ada's and Bob's messages, each with a random-looking messageId, applied."""
    items = [
        {"type": "identify", "userId": ADA, "traits": {"name": "Ada"}, "messageId": "r-1"},
        {"type": "group", "userId": ADA, "groupId": "corp", "traits": {}, "messageId": "r-2"},
        track(ADA, "Opened", messageId="r-3"),
        track(ADA, "Opened", groupId="corp", messageId="r-4"),
        {"type": "group", "userId": "bob", "groupId": "corp", "traits": {}, "messageId": "r-5"},
        track("bob", "Opened", groupId="corp", messageId="r-6"),
        track("bob", "Opened", messageId="r-7"),
    ]
    body = {"batch": items, "sentAt": iso_now()}
    assert post_json("/v1/batch", body, auth=segment_auth(acme.key.key)).status_code == 200
    drain()
    assert remembered(acme) == {f"r-{n}" for n in range(1, 8)}


def remembered(tenant) -> set[str]:
    rows = SeenMessage.objects.filter(product=tenant.product)
    return set(rows.values_list("message_id", flat=True))


def erase(tenant, kind: str, target) -> Erasure:
    erasure = erasure_request(
        product_id=tenant.product.id,
        kind=kind,
        target_id=target.id,
        suppress=False,
        via=Erasure.Via.COMMAND,
    )
    return erasure_run(erasure_id=erasure.id)


def test_the_ids_of_every_message_a_user_sent_go_with_her(acme, sent):
    erasure = erase(acme, Erasure.Kind.USER, User.objects.get(tracking_id=ADA))

    assert remembered(acme) == {"r-5", "r-6", "r-7"}
    assert erasure.counts["seen_messages"] == 4


def test_an_accounts_group_calls_go_and_its_users_tracks_keep_their_ids(acme, sent):
    """The account's users stay, and so do their tracks that named it."""
    erase(acme, Erasure.Kind.ACCOUNT, Account.objects.get(tracking_id="corp"))

    assert remembered(acme) == {"r-1", "r-3", "r-4", "r-6", "r-7"}


def test_an_id_kept_without_hashes_goes_when_it_names_the_user(acme, sent, globex):
    for tenant, message_id in ((acme, f"{ADA}:old"), (acme, "old"), (globex, f"{ADA}:old")):
        SeenMessage.objects.create(
            message_key=seen_message_key(tenant.product.id, message_id),
            product=tenant.product,
            message_id=message_id,
            seen_at=timezone.now(),
        )

    erase(acme, Erasure.Kind.USER, User.objects.get(tracking_id=ADA))

    assert remembered(acme) == {"r-5", "r-6", "r-7", "old"}
    assert remembered(globex) == {f"{ADA}:old"}
