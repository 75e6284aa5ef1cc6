"""Wake-ups coalesce: every stored write queues a drain task, and a worker back from an outage
finds one waiting per request. It drains the backlog in a few transactions and skips the tasks
that drain has made pointless, without a query each."""

import time
from types import SimpleNamespace

import pytest

from engagement.models import Event
from ingestion import tasks, wakeups
from ingestion.models import AcceptedRequest
from ingestion.services import drain as drain_module
from ingestion.store import kick_worker
from tests.ingestion.segment_support import iso_now, segment_auth, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

OUTAGE_SECONDS = 60.0


@pytest.fixture
def fresh_worker(monkeypatch):
    """A worker process that has not drained yet."""
    monkeypatch.setattr(tasks, "_caught_up_from", float("-inf"), raising=False)


@pytest.fixture
def queued(monkeypatch):
    """The drain tasks queued, as (args, kwargs), instead of sending them to the broker."""
    sent: list[tuple[tuple, dict]] = []

    def apply_async(args=None, kwargs=None, **options):
        sent.append((tuple(args or ()), dict(kwargs or {})))

    monkeypatch.setattr(tasks.drain_accepted_requests, "apply_async", apply_async)
    return sent


@pytest.fixture
def drains(monkeypatch):
    """Count the drain transactions run (claims made), empty ones included."""
    real = drain_module.accepted_requests_drain
    calls: list[int] = []

    def counted(*, limit: int, **options):
        result = real(limit=limit, **options)
        calls.append(result.requests)
        return result

    monkeypatch.setattr(drain_module, "accepted_requests_drain", counted)
    return calls


def later(monkeypatch, seconds: float) -> None:
    """The worker's clock (and only the tasks module's reading of it) `seconds` ahead."""
    monkeypatch.setattr(tasks, "time", SimpleNamespace(time=lambda: time.time() + seconds))


def test_kick_worker_says_when_it_queued_the_task(queued):
    before = time.time()
    kick_worker()
    after = time.time()

    [(args, kwargs)] = queued
    assert args == ()
    assert before <= kwargs["queued_at"] <= after


def test_a_worker_back_from_an_outage_drains_the_backlog_in_a_few_transactions(
    acme,
    post_json,
    queued,
    drains,
    fresh_worker,
    monkeypatch,
    settings,
    django_capture_on_commit_callbacks,
):
    settings.INGESTION_DRAIN_BATCH = 10
    # The worker is down: every request through every door queues a task that waits.
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(30):
            response = post_json("/v2/track", {"userId": f"usr_{n}", "event": "A"}, auth=acme.basic)
            assert response.status_code == 202
        for n in range(10):
            response = post_json(
                "/v1/batch",
                {"batch": [track(f"usr_{n}", "B")], "sentAt": iso_now()},
                auth=segment_auth(acme.key.key),
            )
            assert response.status_code == 200
    assert len(queued) == 40
    assert AcceptedRequest.objects.count() == 40

    # It comes back a minute later and works through its queue.
    later(monkeypatch, OUTAGE_SECONDS)
    waiting, queued[:] = list(queued), []
    applied = [tasks.drain_accepted_requests.apply(args, kwargs).get() for args, kwargs in waiting]

    assert sum(applied) == 40
    assert applied[0] == 40 and not any(applied[1:])  # the first task did it all
    # 10 requests a transaction, then one that found the store empty; 39 tasks without a query.
    assert drains == [10, 10, 10, 10, 0]
    assert not AcceptedRequest.objects.exists()
    assert Event.objects.count() == 40
    assert queued == []  # nothing handed on


def test_a_task_queued_after_the_latest_drain_began_drains(acme, drains, monkeypatch, queued):
    monkeypatch.setattr(tasks, "_caught_up_from", time.time())
    kick_worker()  # a request stored since
    [(_, kwargs)] = queued

    tasks.drain_accepted_requests(**kwargs)

    assert len(drains) == 1


@pytest.mark.parametrize("skew_ms", [250, 5_000])
def test_a_task_queued_within_the_clock_margin_drains(acme, drains, monkeypatch, settings, skew_ms):
    """The web machine's clock may be behind the worker's: a task stamped a little before the
    drain began may still have been queued after it. How far is the operator's setting."""
    settings.INGESTION_HOSTS_CLOCK_SKEW_MS = skew_ms
    margin = skew_ms / 1000
    now = time.time()
    monkeypatch.setattr(tasks, "_caught_up_from", now)

    tasks.drain_accepted_requests(queued_at=now - margin + 0.1)
    assert len(drains) == 1

    tasks.drain_accepted_requests(queued_at=now - margin - 0.1)
    assert len(drains) == 1  # skipped


def test_the_wake_ups_a_busy_door_queued_while_a_drain_ran_cost_nothing_once_it_caught_up(
    acme, drains, monkeypatch, django_assert_num_queries
):
    """Under a steady stream each write queues a wake-up, and a score refresh queued by a change
    waits behind them on the same queue. Once a drain that began later has caught up, the
    wake-ups queued more than the clock margin before it return without a query, so the queue
    empties at once and the refresh starts (at 5 s, 130-170 of them ran an empty drain each and
    held every refresh about 3 s: docs/benchmarks.md)."""
    now = time.time()
    monkeypatch.setattr(tasks, "_caught_up_from", now)
    monkeypatch.setattr(tasks, "time", SimpleNamespace(time=lambda: now))  # the worker's clock
    three_seconds_of_kicks = [now - 3 + i * 0.03 for i in range(100)]  # the last at now - 0.03
    stale = [queued_at for queued_at in three_seconds_of_kicks if queued_at < now - 0.25]

    with django_assert_num_queries(0):
        for queued_at in stale:
            assert tasks.drain_accepted_requests(queued_at=queued_at) == 0
    for queued_at in three_seconds_of_kicks[len(stale) :]:
        tasks.drain_accepted_requests(queued_at=queued_at)

    assert len(stale) == 92
    assert len(drains) == 8  # the wake-ups of the last 250 ms, which may not have been seen


def test_a_task_queued_before_the_deploy_still_drains(acme, post_json, drains, monkeypatch):
    """Tasks already in a queue carry no `queued_at`: they drain as before."""
    post_json("/v2/track", {"userId": "usr_ann", "event": "A"}, auth=acme.basic)
    monkeypatch.setattr(tasks, "_caught_up_from", time.time())

    assert tasks.drain_accepted_requests.apply().get() == 1

    assert Event.objects.count() == 1


def test_a_drain_cut_short_skips_nothing_and_hands_on(
    acme, post_json, drains, queued, fresh_worker, monkeypatch, settings
):
    settings.INGESTION_DRAIN_BATCH = 1
    monkeypatch.setattr(tasks, "_DRAIN_SECONDS", 0.0)
    for n in range(3):
        post_json("/v2/track", {"userId": f"usr_{n}", "event": "A"}, auth=acme.basic)

    assert tasks.drain_accepted_requests(queued_at=time.time() - OUTAGE_SECONDS) == 1

    assert tasks._caught_up_from == float("-inf")  # it did not catch up: it proves nothing
    [(_, handed_on)] = queued
    assert tasks.drain_accepted_requests(**handed_on) == 1
    assert tasks.drain_accepted_requests(queued_at=time.time() - OUTAGE_SECONDS) == 1
    assert AcceptedRequest.objects.count() == 0


def test_the_sweep_catching_up_makes_older_tasks_pointless(
    acme, post_json, drains, fresh_worker, monkeypatch
):
    queued_at = time.time()
    post_json("/v2/track", {"userId": "usr_ann", "event": "A"}, auth=acme.basic)
    later(monkeypatch, OUTAGE_SECONDS)

    assert tasks.sweep_accepted_requests() == 1
    assert tasks.drain_accepted_requests(queued_at=queued_at) == 0

    assert len(drains) == 1


# --- One wake-up waiting is enough (ingestion.wakeups), where the cache is shared -----------


def test_without_a_shared_cache_every_wake_up_is_sent(queued, settings):
    settings.CACHE_SHARED = False

    kick_worker()
    kick_worker()

    assert len(queued) == 2


@pytest.mark.usefixtures("shared_redis_cache")
def test_a_wake_up_waiting_for_a_worker_is_not_sent_again_until_one_takes_it(db, queued):
    kick_worker()  # one web process
    kick_worker()  # another, or the same one 50 ms later
    assert len(queued) == 1

    [(_, kwargs)] = queued
    tasks.drain_accepted_requests(**kwargs)  # a worker takes it
    kick_worker()

    assert len(queued) == 2


@pytest.mark.usefixtures("shared_redis_cache")
def test_a_worker_that_takes_a_relied_on_wake_up_drains_even_after_a_later_drain(
    acme, post_json, drains, queued, monkeypatch
):
    """A wake-up queued before the worker's latest drain began would be skipped; but a web
    process that found it waiting sent none for the requests it committed after that drain, so
    the worker drains when it takes it."""
    kick_worker()
    [(_, waiting)] = queued
    monkeypatch.setattr(tasks, "_caught_up_from", time.time() + OUTAGE_SECONDS)  # a drain since
    post_json("/v2/track", {"userId": "usr_ann", "event": "A"}, auth=acme.basic)
    kick_worker()  # after that request's commit: finds the wake-up waiting
    assert len(queued) == 1

    assert tasks.drain_accepted_requests(**waiting) == 1

    assert Event.objects.count() == 1


@pytest.mark.usefixtures("shared_redis_cache")
def test_a_wake_up_the_broker_refused_does_not_hold_back_the_next(monkeypatch, queued):
    def broker_down(*args, **kwargs):
        raise ConnectionError("broker unavailable")

    with monkeypatch.context() as down:
        down.setattr(tasks.drain_accepted_requests, "apply_async", broker_down)
        kick_worker()
    assert queued == []

    kick_worker()  # the broker is back

    assert len(queued) == 1


@pytest.mark.usefixtures("shared_redis_cache")
def test_a_lost_wake_up_holds_back_the_next_for_a_second_at_most(queued):
    kick_worker()  # the broker loses it: no worker ever takes it
    kick_worker()
    assert len(queued) == 1

    time.sleep(wakeups.PENDING_SECONDS + 0.1)
    kick_worker()

    assert len(queued) == 2


@pytest.mark.usefixtures("shared_redis_cache")
def test_a_cache_that_cannot_be_reached_sends_every_wake_up_and_drains_every_task(
    acme, post_json, drains, queued, settings, monkeypatch
):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
        }
    }
    kick_worker()
    kick_worker()
    assert len(queued) == 2

    monkeypatch.setattr(tasks, "_caught_up_from", time.time() + OUTAGE_SECONDS)
    post_json("/v2/track", {"userId": "usr_ann", "event": "A"}, auth=acme.basic)
    assert tasks.drain_accepted_requests(**queued[0][1]) == 1
