"""End to end, issue 28: an erasure requested while two real workers drain the user's calls
completes, and nothing accepted before it ran survives it.

900 identify/group/track calls for one user go over HTTP to a live server, from several
threads, while two worker processes drain them; `DELETE /v2/users/{id}?suppress=false` goes
0.3 s in. Before the fix the erasure locked the user row and then waited for the accepted rows
a drain held, while that drain waited for the user row: PostgreSQL broke the deadlock, the
erasure failed and nothing retried it (the user kept their email and events).

Calls still arriving after the erasure ran are new data (no suppression): they may bring the
user back, as a new row. So the test checks what a person is owed: the receipt says
`completed`, the erased row and everything pointing at it is gone, and no call answered before
the erasure started left anything behind.
"""

import json
import signal
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import pytest
import redis
from django.conf import settings
from django.db import connection

from engagement.models import Event, EventRollup, Membership, User
from ingestion.models import AcceptedRequest
from readapi.services import api_token_create
from tests.conftest import make_tenant
from tests.ingestion.test_e2e_worker import post, service_env, start, stop, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

ADA = "ada-race-7731"
CALLS = 900
BASE_MS = 1_700_000_000_000  # each call's timestamp is BASE_MS + its number
WORKER_SESSIONS = "eds-race-worker"  # the workers' database sessions' application_name


def delete(url: str, bearer: str) -> dict:
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {bearer}"}, method="DELETE"
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (local server)
        assert response.status == 202
        return json.loads(response.read())


def receipt(url: str, bearer: str) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {bearer}"})
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (local server)
        return json.loads(response.read())


def call(number: int) -> tuple[str, dict]:
    """Call `number` for Ada: an identify, a group or a track, in turn."""
    when = BASE_MS + number
    kind = number % 3
    if kind == 0:
        return "v2/identify", {"userId": ADA, "timestamp": when, "traits": {"email": "ada@x.io"}}
    if kind == 1:
        return "v2/group", {"userId": ADA, "groupId": "corp", "timestamp": when}
    return "v2/track", {"userId": ADA, "event": "Opened", "timestamp": when}


def worker_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [WORKER_SESSIONS]
        )
        return cursor.fetchone()[0]


def deadlocks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


@pytest.fixture
def two_workers(live_door, broker):
    env = service_env(PGAPPNAME=WORKER_SESSIONS)
    options = ("worker", "--pool", "solo", "--without-gossip", "--without-mingle")
    workers = [start(*options, "--hostname", f"race{n}@%h", env=env) for n in (1, 2)]
    yield workers
    for worker in workers:
        stop(worker, signal.SIGTERM)


@pytest.fixture
def broker():
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.flushdb()
    yield client
    client.flushdb()


def test_an_erasure_during_two_workers_drains_completes(live_door, two_workers):
    acme = make_tenant("Acme")
    _, token = api_token_create(product_id=acme.product.id, name="eraser", scopes=["delete"])
    deadlocks_before = deadlocks()
    # Ada exists (the workers are up and draining) before the burst begins.
    path, body = call(0)
    assert post(f"{live_door.url}/{path}", body, acme.key.key) == 202
    wait_for(lambda: User.objects.filter(tracking_id=ADA).exists(), timeout=30)
    ada_id = User.objects.get(tracking_id=ADA).id

    answered_at: dict[int, float] = {}

    def send(number: int) -> None:
        path, body = call(number)
        assert post(f"{live_door.url}/{path}", body, acme.key.key) == 202
        answered_at[number] = time.time()

    deletion: dict = {}

    def erase_soon() -> None:
        time.sleep(0.3)
        deletion.update(delete(f"{live_door.url}/v2/users/{ada_id}?suppress=false", token))

    eraser = threading.Thread(target=erase_soon)
    with ThreadPoolExecutor(max_workers=6) as senders:
        eraser.start()
        list(senders.map(send, range(1, CALLS)))
    eraser.join()

    url = f"{live_door.url}{deletion['_links']['self']}"
    wait_for(lambda: receipt(url, token)["status"] in ("completed", "failed"), timeout=40)
    wait_for(lambda: not AcceptedRequest.objects.exists(), timeout=40)
    done = receipt(url, token)
    for worker in two_workers:
        stop(worker)
    # A session flushes its statistics (the deadlocks it met) as it ends.
    wait_for(lambda: worker_sessions() == 0, timeout=10)

    assert done["status"] == "completed", done
    assert done["counts"]["users"] == 1
    assert not User.objects.filter(id=ada_id).exists()
    for model in (Event, EventRollup, Membership):
        assert not model.objects.filter(user_id=ada_id).exists(), model.__name__
    # A call answered before the erasure started was erased or dropped, whatever its timing.
    started = datetime.fromisoformat(done["started_at"]).timestamp()
    before = {number for number, at in answered_at.items() if at < started} | {0}
    stamps = Event.objects.filter(product=acme.product).values_list("timestamp", flat=True)
    survivors = {round(stamp.timestamp() * 1000) - BASE_MS for stamp in stamps}
    assert not survivors & before
    comeback = User.objects.filter(product=acme.product, tracking_id=ADA).first()
    if comeback is not None:  # brought back by calls that arrived after the erasure ran
        assert comeback.id != ada_id
    assert deadlocks() == deadlocks_before
