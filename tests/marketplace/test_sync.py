"""Syncs against a mocked marketplace: paging, mapping, winners, retries, resume, states."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from responses import matchers

from engagement.models import Account
from marketplace import services, sync
from marketplace.models import MarketplaceConnection, SyncRun
from tests.factories import AccountFactory
from tests.marketplace.conftest import (
    LICENSES_URL,
    PRODUCT_ID,
    cloud_license,
    connect,
    datacenter_license,
    license_page,
    run_until_done,
)

State = MarketplaceConnection.State
Outcome = SyncRun.Outcome
NEXT = "/rest/3/reporting/developer-space/D/licenses?productId=P&offset=50&limit=50"
NEXT_URL = "https://marketplace.test/marketplace" + NEXT


def only_run(connection) -> SyncRun:
    return SyncRun.objects.get(connection=connection)


def test_saving_valid_details_activates_schedules_and_starts_a_full_sync(
    acme, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        connection = connect(acme)
    assert connection.state == State.ACTIVE
    task = PeriodicTask.objects.get(id=connection.periodic_task_id)
    assert task.enabled and task.task == "marketplace.tasks.connection_sync_scheduled"
    assert (task.interval.every, task.interval.period) == (6, "hours")
    assert task.args == f"[{connection.id}]"
    run = only_run(connection)
    assert (run.trigger, run.mode, run.outcome) == ("connected", "full", "running")
    assert len(callbacks) == 1  # the run's task is queued once the transaction commits


def test_full_sync_imports_every_page_and_records_the_run(acme, mocked):
    AccountFactory(product=acme.product, tracking_id="cloud-a", traits={"plan": "pro"})
    mocked.get(
        LICENSES_URL,
        match=[
            matchers.query_param_matcher(
                {"productId": PRODUCT_ID, "withDataInsights": "true", "limit": "50", "offset": "0"}
            )
        ],
        json=license_page([cloud_license("cloud-a"), datacenter_license(1)], NEXT, total=3),
    )
    mocked.get(NEXT_URL, json=license_page([cloud_license("cloud-b", status="cancelled")]))
    run = run_until_done(only_run(connect(acme)).id)

    assert run.outcome == Outcome.SUCCEEDED
    assert (
        run.pages,
        run.licenses_seen,
        run.accounts_matched,
        run.accounts_created,
        run.skipped_without_cloud_id,
    ) == (2, 3, 1, 1, 1)
    assert run.finished_at is not None and run.next_url == ""
    a = Account.objects.get(product=acme.product, tracking_id="cloud-a")
    assert a.traits["plan"] == "pro"
    assert a.traits["am.status"] == "active" and a.traits["am.tier.number"] == 50
    assert "admin@acme.example" not in str(a.traits)
    b = Account.objects.get(product=acme.product, tracking_id="cloud-b")
    assert b.identified is False and b.traits["am.status"] == "cancelled"
    connection = MarketplaceConnection.objects.get(product=acme.product)
    assert connection.last_success_at is not None and connection.full_sync_completed_at


def test_scheduled_sync_asks_for_licenses_updated_in_the_last_five_days(acme, mocked):
    connection = connect(acme)
    run_first = only_run(connection)
    mocked.get(LICENSES_URL, json=license_page([]))
    run_until_done(run_first.id)
    since = (timezone.now() - timedelta(days=5)).date().isoformat()
    mocked.get(
        LICENSES_URL,
        match=[matchers.query_param_matcher({"lastUpdated": since}, strict_match=False)],
        json=license_page([cloud_license("cloud-c")]),
    )
    result = services.connection_sync_request(connection_id=connection.id, trigger="scheduled")
    run = run_until_done(result.run_id)
    assert (run.mode, run.last_updated_from.isoformat(), run.outcome) == (
        "updated",
        since,
        "succeeded",
    )
    [licenses_call] = [c for c in mocked.calls if c.request.url.startswith(LICENSES_URL)][-1:]
    assert licenses_call.request.url.count("lastUpdated=" + since) == 1
    assert Account.objects.filter(product=acme.product, tracking_id="cloud-c").exists()


def test_several_licenses_for_one_cloud_id_active_wins_then_latest_maintenance_end(acme, mocked):
    page1 = [
        cloud_license(
            "site", appEntitlementId="old", status="active", maintenanceEndDate="2026-01-01"
        ),
        cloud_license(
            "site", appEntitlementId="gone", status="cancelled", maintenanceEndDate="2028-01-01"
        ),
    ]
    page2 = [
        cloud_license(
            "site",
            appEntitlementId="new",
            status="active",
            maintenanceEndDate="2026-09-01",
            tier="100 Users",
        )
    ]
    mocked.get(LICENSES_URL, json=license_page(page1, NEXT))
    mocked.get(NEXT_URL, json=license_page(page2))
    connection = connect(acme)
    run = run_until_done(only_run(connection).id)
    traits = Account.objects.get(product=acme.product, tracking_id="site").traits
    assert traits["am.appEntitlementId"] == "new" and traits["am.tier.number"] == 100
    assert (run.accounts_created, run.accounts_matched) == (1, 0)  # one account, counted once

    # A later sync that sees only the cancelled license again does not displace the winner.
    mocked.get(LICENSES_URL, json=license_page([page1[1]]))
    again = services.connection_sync_request(connection_id=connection.id, trigger="manual")
    run_until_done(again.run_id)
    assert (
        Account.objects.get(product=acme.product, tracking_id="site").traits["am.appEntitlementId"]
        == "new"
    )
    # The winner itself being cancelled lets the next best take over.
    mocked.get(LICENSES_URL, json=license_page([dict(page2[0], status="cancelled")]))
    run_until_done(
        services.connection_sync_request(connection_id=connection.id, trigger="manual").run_id
    )
    assert (
        Account.objects.get(product=acme.product, tracking_id="site").traits["am.appEntitlementId"]
        == "old"
    )


def test_new_license_values_replace_old_am_traits_entirely(acme, mocked):
    mocked.get(
        LICENSES_URL, json=license_page([cloud_license("s", parentProductEdition="Premium")])
    )
    connection = connect(acme)
    run_until_done(only_run(connection).id)
    mocked.get(LICENSES_URL, json=license_page([cloud_license("s", parentProductEdition="NA")]))
    run_until_done(
        services.connection_sync_request(connection_id=connection.id, trigger="manual").run_id
    )
    traits = Account.objects.get(product=acme.product, tracking_id="s").traits
    assert "am.parentProductEdition" not in traits


def test_transient_failure_retries_later_and_resumes_from_the_page_it_stopped_at(
    acme, mocked, slept
):
    mocked.get(LICENSES_URL, json=license_page([cloud_license("p1")], NEXT))
    mocked.get(NEXT_URL, status=503, headers={"Retry-After": "120"})
    connection = connect(acme)
    run = only_run(connection)
    step = sync.sync_run_execute(run_id=run.id)
    run.refresh_from_db()
    assert step.retry_in == 120 and run.outcome == Outcome.RETRYING
    assert run.pages == 1 and run.next_url == NEXT_URL and "503" in run.error
    assert "503" in MarketplaceConnection.objects.get(id=connection.id).last_error

    mocked.replace("GET", NEXT_URL, json=license_page([cloud_license("p2")]))
    first_page_calls = sum(1 for c in mocked.calls if c.request.url.startswith(LICENSES_URL))
    run = run_until_done(run.id)
    assert run.outcome == Outcome.SUCCEEDED and run.pages == 2 and run.licenses_seen == 2
    # the first page was not fetched again
    assert (
        sum(1 for c in mocked.calls if c.request.url.startswith(LICENSES_URL)) == first_page_calls
    )


def test_transient_failures_give_up_after_bounded_task_retries(acme, mocked, slept):
    mocked.get(LICENSES_URL, status=500)
    run = run_until_done(only_run(connect(acme)).id)
    assert run.outcome == Outcome.FAILED and run.attempts == sync.TASK_RETRIES
    assert MarketplaceConnection.objects.get(product=acme.product).state == State.ACTIVE


def test_401_requires_authentication_pauses_the_schedule_until_details_are_saved_again(
    acme, mocked
):
    mocked.get(LICENSES_URL, status=401)
    connection = connect(acme)
    run = run_until_done(only_run(connection).id)
    connection.refresh_from_db()
    assert run.outcome == Outcome.UNAUTHORIZED and "API token" in run.error
    assert connection.state == State.REQUIRES_AUTHENTICATION and connection.last_error
    assert PeriodicTask.objects.get(id=connection.periodic_task_id).enabled is False
    refused = services.connection_sync_request(connection_id=connection.id, trigger="scheduled")
    assert not refused.started and SyncRun.objects.filter(connection=connection).count() == 1

    mocked.replace("GET", LICENSES_URL, json=license_page([cloud_license("back")]))
    connection = connect(acme)  # all four values again, with a new token
    assert connection.state == State.ACTIVE
    assert PeriodicTask.objects.get(id=connection.periodic_task_id).enabled is True
    new_run = SyncRun.objects.filter(connection=connection).first()
    assert new_run.id != run.id and run_until_done(new_run.id).outcome == Outcome.SUCCEEDED


@pytest.mark.parametrize(("status", "hint"), [(403, "license reporting"), (404, "vendor ID")])
def test_403_and_404_stop_the_run_with_what_to_check(acme, mocked, status, hint):
    mocked.get(LICENSES_URL, status=status)
    connection = connect(acme)
    run = run_until_done(only_run(connection).id)
    connection.refresh_from_db()
    assert run.outcome == Outcome.STOPPED and hint in run.error
    assert connection.state == State.ACTIVE and hint in connection.last_error
    # the licenses come after the transactions and the feedback; nothing is asked after them
    assert mocked.calls[-1].request.url.startswith(LICENSES_URL) and len(mocked.calls) == 3


def test_disconnect_stops_future_syncs_and_keeps_traits(acme, mocked):
    mocked.get(LICENSES_URL, json=license_page([cloud_license("kept")]))
    connection = connect(acme)
    run_until_done(only_run(connection).id)
    assert services.connections_disconnect(connection_ids=[connection.id]) == 1
    connection.refresh_from_db()
    assert connection.state == State.DISCONNECTED and not connection.api_token
    assert PeriodicTask.objects.get(id=connection.periodic_task_id).enabled is False
    assert not services.connection_sync_request(
        connection_id=connection.id, trigger="manual"
    ).started
    assert (
        Account.objects.get(product=acme.product, tracking_id="kept").traits["am.status"]
        == "active"
    )
    assert connect(acme).state == State.ACTIVE  # saving all four values again reconnects
    assert PeriodicTask.objects.get(id=connection.periodic_task_id).enabled is True


def test_two_syncs_of_one_connection_never_run_at_once(acme, mocked):
    connection = connect(acme)
    run = only_run(connection)
    again = services.connection_sync_request(connection_id=connection.id, trigger="manual")
    assert not again.started and again.run_id == run.id  # the queued run is still due

    # a worker holds the lease: another execution of the run does nothing
    assert sync.lease_acquire(connection.id, "other-worker")
    assert sync.sync_run_execute(run_id=run.id).outcome == "busy"
    assert len(mocked.calls) == 0
    sync.lease_release(connection.id, "other-worker")


def test_a_run_whose_task_never_started_is_closed_and_the_next_request_starts_afresh(acme, mocked):
    connection = connect(acme)
    run = only_run(connection)
    SyncRun.objects.filter(id=run.id).update(retry_at=timezone.now() - timedelta(hours=1))
    again = services.connection_sync_request(connection_id=connection.id, trigger="manual")
    assert again.started and again.run_id != run.id
    run.refresh_from_db()
    assert run.outcome == Outcome.FAILED and "marketplace worker running" in run.error
    assert (
        "marketplace worker running"
        in MarketplaceConnection.objects.get(id=connection.id).last_error
    )


def test_scheduled_full_sync_continues_a_full_sync_that_gave_up(acme, mocked, slept):
    mocked.get(LICENSES_URL, json=license_page([cloud_license("p1")], NEXT))
    mocked.get(NEXT_URL, status=502)
    connection = connect(acme)
    failed = run_until_done(only_run(connection).id)
    assert failed.outcome == Outcome.FAILED and failed.next_url == NEXT_URL
    mocked.replace("GET", NEXT_URL, json=license_page([cloud_license("p2")]))
    result = services.connection_sync_request(connection_id=connection.id, trigger="scheduled")
    run = run_until_done(result.run_id)
    assert run.mode == "full" and run.pages == 1 and run.outcome == Outcome.SUCCEEDED
    assert run.note == f"Continues run {failed.id} from where it stopped." and run.error == ""


def test_deleting_a_connection_deletes_its_schedule(acme):
    connection = connect(acme)
    task_id = connection.periodic_task_id
    connection.delete()
    assert not PeriodicTask.objects.filter(id=task_id).exists()


def test_token_is_stored_encrypted(acme):
    from django.db import connection as db

    connect(acme)
    with db.cursor() as cursor:
        cursor.execute("SELECT api_token FROM marketplace_marketplaceconnection")
        stored = cursor.fetchone()[0]
    assert stored and "vera-token" not in stored
    assert MarketplaceConnection.objects.get(product=acme.product).api_token == "vera-token-1"


def test_page_writes_are_bulk(acme, mocked, django_assert_max_num_queries):
    licenses = [cloud_license(f"bulk-{n}") for n in range(50)]
    mocked.get(LICENSES_URL, json=license_page(licenses))
    run = only_run(connect(acme))
    # A fixed number per commit (licenses, transactions, feedback, the traits), none per license.
    with django_assert_max_num_queries(60):
        run = run_until_done(run.id)
    assert run.accounts_created == 50


def test_saving_details_during_a_run_closes_it_and_the_new_run_waits_its_turn(acme, mocked):
    mocked.get(LICENSES_URL, json=license_page([cloud_license("w")]))
    first = only_run(connect(acme))
    assert sync.lease_acquire(first.connection_id, "worker-of-the-first-run")
    connection = connect(acme)  # all four values saved again meanwhile
    first.refresh_from_db()
    assert first.outcome == Outcome.STOPPED and "Superseded" in first.error
    second = SyncRun.objects.filter(connection=connection).first()
    step = sync.sync_run_execute(run_id=second.id)
    assert step.outcome == "busy" and step.retry_in == sync.BUSY_RETRY_SECONDS
    # the first run's worker finishing cannot reopen or relabel its closed run
    assert sync.run_finish(first, Outcome.SUCCEEDED).outcome == Outcome.STOPPED
    assert SyncRun.objects.get(id=first.id).outcome == Outcome.STOPPED
    sync.lease_release(connection.id, "worker-of-the-first-run")
    assert run_until_done(second.id).outcome == Outcome.SUCCEEDED
