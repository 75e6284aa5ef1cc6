"""A 202 means stored: a crashed drain, concurrent workers and a full backlog lose nothing."""

import threading

import pytest
from django.db import connections

from engagement import services as engagement_services
from engagement.models import Event, EventRollup
from ingestion import store
from ingestion.models import AcceptedRequest
from ingestion.services.drain import accepted_requests_drain

pytestmark = pytest.mark.both_databases


class WorkerKilled(BaseException):
    """Stands in for SIGKILL mid-transaction: nothing after it runs, nothing it did commits."""


def test_a_202_is_stored_before_any_worker_runs(
    acme, post_json, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post_json("/v2/track", {"userId": "u1", "event": "A"}, auth=acme.basic)

    assert response.status_code == 202
    assert AcceptedRequest.objects.count() == 1
    assert len(callbacks) == 1  # the kick to a worker goes out only after the commit


def test_a_worker_killed_mid_drain_applies_nothing_and_the_next_drain_applies_once(
    acme, post_json, drain, monkeypatch
):
    post_json("/v2/track", {"userId": "u1", "event": "Report_Created"}, auth=acme.basic)
    applied = engagement_services.messages_apply

    def apply_then_die(**kwargs):
        applied(**kwargs)
        raise WorkerKilled

    monkeypatch.setattr(engagement_services, "messages_apply", apply_then_die)
    with pytest.raises(WorkerKilled):
        accepted_requests_drain(limit=100)
    assert Event.objects.count() == 0
    assert AcceptedRequest.objects.count() == 1

    monkeypatch.setattr(engagement_services, "messages_apply", applied)
    assert drain() == 1
    assert drain() == 0
    assert Event.objects.count() == 1
    assert EventRollup.objects.get().count == 1


@pytest.mark.postgresql  # two sessions locking rows at once
@pytest.mark.django_db(transaction=True)
def test_concurrent_workers_apply_each_request_exactly_once(
    post_json, django_capture_on_commit_callbacks
):
    from tests.conftest import make_tenant

    acme = make_tenant("Acme")
    with django_capture_on_commit_callbacks(execute=False):
        for n in range(120):
            post_json("/v2/track", {"userId": f"u{n % 7}", "event": "A"}, auth=acme.basic)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while accepted_requests_drain(limit=7).requests:
                pass
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert AcceptedRequest.objects.count() == 0
    assert Event.objects.count() == 120
    assert sum(EventRollup.objects.values_list("count", flat=True)) == 120


def test_over_the_backlog_limit_answers_503_with_retry_after(acme, post_json, settings):
    settings.INGESTION_BACKLOG_LIMIT = 1
    settings.INGESTION_RETRY_AFTER_SECONDS = 7
    store._backlog_cache["checked_at"] = 0.0
    first = post_json("/v2/track", {"userId": "u1", "event": "A"}, auth=acme.basic)
    store._backlog_cache["checked_at"] = 0.0
    second = post_json("/v2/track", {"userId": "u1", "event": "A"}, auth=acme.basic)
    store._backlog_cache["checked_at"] = 0.0

    assert first.status_code == 202
    assert second.status_code == 503
    assert second["Retry-After"] == "7"
    assert second.json()["code"] == "service_unavailable"
    assert AcceptedRequest.objects.count() == 1


@pytest.mark.postgresql  # stops a database server
@pytest.mark.django_db(transaction=True)
def test_database_unreachable_answers_503_with_retry_after(post_json):
    from tests.conftest import database_down, make_tenant

    acme = make_tenant("Acme")
    store._backlog_cache["checked_at"] = 0.0
    with database_down():
        response = post_json("/v2/track", {"userId": "u1", "event": "A"}, auth=acme.basic)
    store._backlog_cache["checked_at"] = 0.0

    assert response.status_code == 503
    assert response["Retry-After"]
    assert response.json()["code"] == "service_unavailable"
    assert AcceptedRequest.objects.count() == 0
