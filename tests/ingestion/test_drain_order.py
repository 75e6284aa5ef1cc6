"""Workers draining at once apply an ingestion key's requests in the order they were accepted:
a drain that claimed later rows waits for the drain holding earlier ones of the same key."""

import threading

import pytest
from django.db import connection

from engagement.models import Event
from ingestion.services import drain
from tests.conftest import make_tenant

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


def test_a_track_claimed_while_the_group_call_before_it_waits_counts_for_that_account(
    post_json, monkeypatch
):
    initech = make_tenant("Initech")
    group = {"userId": "ann", "groupId": "acme-co", "traits": {"name": "Acme Co"}}
    assert post_json("/v2/group", group, auth=initech.basic).status_code == 202
    track = {"userId": "ann", "event": "Report Created"}
    assert post_json("/v2/track", track, auth=initech.basic).status_code == 202

    # Worker A claims the group call (a budget of one message) and stops there, before it
    # applies anything; worker B claims the track meanwhile.
    a_claimed, a_may_go = threading.Event(), threading.Event()
    claim = drain.requests_claim

    def claim_then_pause_in_a(*, limit: int):
        batch = claim(limit=limit)
        if threading.current_thread().name == "A":
            a_claimed.set()
            assert a_may_go.wait(10)
        return batch

    monkeypatch.setattr(drain, "requests_claim", claim_then_pause_in_a)
    results = {}

    def worker(limit: int) -> None:
        try:
            results[threading.current_thread().name] = drain.accepted_requests_drain(limit=limit)
        finally:
            connection.close()

    a = threading.Thread(target=worker, args=(1,), name="A")
    a.start()
    assert a_claimed.wait(10)
    b = threading.Thread(target=worker, args=(10,), name="B")
    b.start()
    b.join(0.5)
    assert b.is_alive(), "B applied the track before A applied the group call accepted before it"
    a_may_go.set()
    a.join(10)
    b.join(10)

    assert (results["A"].requests, results["B"].requests) == (1, 1)
    event = Event.objects.get(product=initech.product, name="Report Created")
    assert event.account.tracking_id == "acme-co"
