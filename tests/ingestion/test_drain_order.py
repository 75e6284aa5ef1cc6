"""Workers draining at once: a track counts for the account a call accepted before it linked,
whichever worker claimed each (a drain that claimed later rows waits for the drain holding an
earlier call that links users), and rows of tracks alone are drained side by side."""

import threading

import pytest
from django.db import connection

from engagement.models import Event
from ingestion.services import drain
from ingestion.services.keys import ingestion_key_create
from tests.conftest import make_tenant
from tests.ingestion.segment_support import segment_auth

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


class PausedDrain:
    """Worker A drains a budget of one message and stops right after its claim, before it
    applies anything, until `go()`; worker B drains the rest meanwhile."""

    def __init__(self, monkeypatch) -> None:
        self.a_claimed, self.a_may_go = threading.Event(), threading.Event()
        self.results: dict[str, drain.DrainResult] = {}
        claim = drain.requests_claim

        def claim_then_pause_in_a(*, limit: int):
            batch = claim(limit=limit)
            if threading.current_thread().name == "A":
                self.a_claimed.set()
                assert self.a_may_go.wait(10)
            return batch

        monkeypatch.setattr(drain, "requests_claim", claim_then_pause_in_a)
        self.a = threading.Thread(target=self._worker, args=(1,), name="A")
        self.b = threading.Thread(target=self._worker, args=(10,), name="B")

    def _worker(self, limit: int) -> None:
        try:
            self.results[threading.current_thread().name] = drain.accepted_requests_drain(
                limit=limit
            )
        finally:
            connection.close()

    def run(self) -> tuple[bool, tuple[int, int]]:
        """Start A, then B once A has claimed; let A go half a second after B started. Returns
        whether B was still waiting then, and the requests each drained."""
        self.a.start()
        assert self.a_claimed.wait(10)
        self.b.start()
        self.b.join(0.5)
        waited = self.b.is_alive()
        self.a_may_go.set()
        self.a.join(10)
        self.b.join(10)
        return waited, (self.results["A"].requests, self.results["B"].requests)


@pytest.fixture
def send(api_client):
    """POST a Segment call with an ingestion key; it must be accepted."""

    def post(key: str, path: str, body: dict) -> None:
        auth = {"HTTP_AUTHORIZATION": segment_auth(key)}
        response = api_client.post(path, body, format="json", **auth)
        assert response.status_code == 200, response.content

    return post


# Calls that link a user to an account (or an id to a user) and the track sent right after.
LINKING_CALLS = {
    "group call": ("/v1/group", {"userId": "ann", "groupId": "acme-co"}, "ann"),
    "identify naming a groupId": ("/v1/identify", {"userId": "ann", "groupId": "acme-co"}, "ann"),
    "alias": ("/v1/alias", {"previousId": "visitor-9", "userId": "ann"}, "visitor-9"),
}


@pytest.mark.parametrize("call", LINKING_CALLS.values(), ids=LINKING_CALLS.keys())
def test_a_track_claimed_while_the_call_linking_its_user_waits_counts_for_that_account(
    send, monkeypatch, call
):
    initech = make_tenant("Initech")
    key = initech.key.key
    if call[0] == "/v1/alias":  # ann is linked already; the alias makes visitor-9 ann
        send(key, "/v1/group", {"userId": "ann", "groupId": "acme-co"})
        drain.accepted_requests_drain(limit=10)
    path, body, sender = call
    send(key, path, body)
    send(key, "/v1/track", {"userId": sender, "event": "Report Created"})

    waited, drained = PausedDrain(monkeypatch).run()

    assert waited, "B applied the track before A applied the call accepted before it"
    assert drained == (1, 1)
    event = Event.objects.get(product=initech.product, name="Report Created")
    assert (event.user.tracking_id, event.account.tracking_id) == ("ann", "acme-co")


def test_a_track_sent_with_another_of_the_products_keys_waits_for_the_group_call_too(
    send, monkeypatch
):
    initech = make_tenant("Initech")
    browser_key = ingestion_key_create(product_id=initech.product.id, label="Browser")
    send(initech.key.key, "/v1/group", {"userId": "ann", "groupId": "acme-co"})
    send(browser_key.key, "/v1/track", {"userId": "ann", "event": "Report Created"})

    waited, drained = PausedDrain(monkeypatch).run()

    assert waited, "B applied the browser's track before A applied the server's group call"
    assert drained == (1, 1)
    event = Event.objects.get(product=initech.product, name="Report Created")
    assert event.account.tracking_id == "acme-co"


def test_tracks_of_one_key_are_drained_side_by_side(send, monkeypatch):
    initech = make_tenant("Initech")
    key = initech.key.key
    for event in ("Report Created", "Report Shared"):
        send(key, "/v1/track", {"userId": "ann", "event": event, "context": {"groupId": "acme-co"}})
    send(key, "/v1/identify", {"userId": "ann", "traits": {"plan": "pro"}})  # links nothing

    waited, drained = PausedDrain(monkeypatch).run()

    assert not waited, "B waited for A although A's rows link no one"
    assert drained == (1, 2)
    stored = Event.objects.filter(product=initech.product)
    assert sorted(stored.values_list("name", "account__tracking_id")) == [
        ("Report Created", "acme-co"),
        ("Report Shared", "acme-co"),
    ]
    assert stored.get(name="Report Created").user.traits == {"plan": "pro"}
