"""A worker drains a backlog on several connections at once (INGESTION_DRAIN_CONNECTIONS): each
message applied once, a track still counting for the account a call accepted before it linked,
and a failure on the other connection reported, not lost."""

import threading
import time

import pytest

from engagement.models import Event, EventRollup
from ingestion.models import AcceptedRequest, SeenMessage
from ingestion.services import drain
from tests.conftest import make_tenant
from tests.ingestion.segment_support import segment_auth

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

BATCH = 5  # messages a drain transaction applies: 41 calls make nine batches
TRACKS = 40


@pytest.fixture
def initech(api_client, settings):
    """A product whose store holds a group call linking ann to acme-co, then 40 of ann's tracks
    that name no account, each with a messageId (as Segment-family SDKs send)."""
    settings.INGESTION_DRAIN_CONNECTIONS = 2
    tenant = make_tenant("Initech")
    auth = {"HTTP_AUTHORIZATION": segment_auth(tenant.key.key)}
    calls = [("/v1/group", {"userId": "ann", "groupId": "acme-co", "messageId": "m-group"})]
    calls += [
        ("/v1/track", {"userId": "ann", "event": "Report Created", "messageId": f"m-{n}"})
        for n in range(TRACKS)
    ]
    for path, body in calls:
        response = api_client.post(path, body, format="json", **auth)
        assert response.status_code == 200, response.content
    return tenant


@pytest.fixture
def drained_by(monkeypatch):
    """The requests each thread's drains applied. The first batch (on the caller's thread)
    applies nothing until a drain on the other connection has claimed rows and had half a second
    to apply them, so that connection surely takes part, with a batch claimed while the group
    call before it was not yet applied."""
    applied: dict[str, int] = {}
    other_claimed = threading.Event()
    claim, apply = drain.requests_claim, drain.requests_apply

    def claim_noted(*, limit: int):
        batch = claim(limit=limit)
        if batch.request_count and threading.current_thread() is not threading.main_thread():
            other_claimed.set()
        return batch

    def apply_once_the_other_claimed(*args, **kwargs):
        if threading.current_thread() is threading.main_thread():
            assert other_claimed.wait(10), "no other connection claimed the backlog"
            time.sleep(0.5)
        return apply(*args, **kwargs)

    def counted(**options):
        result = real_drain(**options)
        name = "caller" if threading.current_thread() is threading.main_thread() else "other"
        applied[name] = applied.get(name, 0) + result.requests
        return result

    real_drain = drain.accepted_requests_drain
    monkeypatch.setattr(drain, "requests_claim", claim_noted)
    monkeypatch.setattr(drain, "requests_apply", apply_once_the_other_claimed)
    monkeypatch.setattr(drain, "accepted_requests_drain", counted)
    return applied


def test_a_backlog_is_drained_on_two_connections_each_message_once(initech, drained_by):
    result, more = drain.accepted_requests_drain_for(seconds=30, batch=BATCH)

    assert (result.requests, result.dropped, more) == (TRACKS + 1, 0, False)
    assert set(drained_by) == {"caller", "other"}
    assert drained_by["caller"] + drained_by["other"] == TRACKS + 1
    assert not AcceptedRequest.objects.exists()
    assert SeenMessage.objects.filter(product_id=initech.product.id).count() == TRACKS + 1
    events = Event.objects.filter(product=initech.product)
    # Every track counts for acme-co, the ones the other connection applied included: its batch
    # waited for the caller's, which holds the group call, to commit.
    assert list(events.values_list("account__tracking_id").distinct()) == [("acme-co",)]
    assert events.count() == TRACKS
    [rollup] = EventRollup.objects.filter(product=initech.product)
    assert (rollup.account.tracking_id, rollup.count) == ("acme-co", TRACKS)


def test_a_failure_on_the_other_connection_is_raised(initech, monkeypatch):
    real_drain = drain.accepted_requests_drain

    def failing_beside(**options):
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("the other connection failed")
        return real_drain(**options)

    monkeypatch.setattr(drain, "accepted_requests_drain", failing_beside)

    with pytest.raises(RuntimeError, match="the other connection failed"):
        drain.accepted_requests_drain_for(seconds=30, batch=BATCH)
    # The caller's connection drained the rest meanwhile, each message once.
    assert not AcceptedRequest.objects.exists()
    assert Event.objects.filter(product=initech.product).count() == TRACKS


def test_one_connection_when_so_configured(initech, settings, monkeypatch):
    settings.INGESTION_DRAIN_CONNECTIONS = 1
    threads = set()
    real_drain = drain.accepted_requests_drain

    def noted(**options):
        threads.add(threading.current_thread().name)
        return real_drain(**options)

    monkeypatch.setattr(drain, "accepted_requests_drain", noted)

    result, more = drain.accepted_requests_drain_for(seconds=30, batch=BATCH)

    assert (result.requests, more) == (TRACKS + 1, False)
    assert threads == {threading.main_thread().name}
