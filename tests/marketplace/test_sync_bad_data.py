"""Bad data and bad pages: the license is skipped with its reason, the run and the connection
say what happened, earlier pages stay applied, and the connection is free for the next sync."""

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from engagement.models import Account
from marketplace import services, sync
from marketplace.models import License, MarketplaceConnection, SyncRun
from tests.marketplace.conftest import (
    LICENSES_URL,
    cloud_license,
    connect,
    license_page,
    run_until_done,
)

pytestmark = pytest.mark.both_databases

Outcome = SyncRun.Outcome
PAGE2 = "/rest/3/reporting/developer-space/D/licenses?offset=50"
PAGE3 = "/rest/3/reporting/developer-space/D/licenses?offset=100"
URL2 = "https://marketplace.test/marketplace" + PAGE2
URL3 = "https://marketplace.test/marketplace" + PAGE3
BIG = "9" * 5000


def raw_page(licenses: list[dict], next_href: str | None = None) -> str:
    """A page as the wire carries it, with the numbers json.dumps cannot write put back."""
    text = json.dumps(license_page(licenses, next_href))
    return text.replace('"__BIG__"', BIG).replace('"__NAN__"', "NaN").replace('"__INF__"', "1e999")


def test_bad_licenses_on_page_three_are_skipped_with_reasons_and_the_rest_is_stored(
    acme, mocked, capsys
):
    bad = [
        cloud_license("nan-text", evaluationOpportunitySize="NaN"),
        cloud_license("nan-json", evaluationOpportunitySize="__NAN__"),
        cloud_license("huge", daysToConvertEval="__INF__"),
        cloud_license("nul-company", contactDetails={"company": "Acme\x00"}),
        cloud_license("nul-cloud\x00"),
        cloud_license("surrogate", addonName="x\ud800"),
        cloud_license("tier", tier="__BIG__"),
        cloud_license("long", addonName="y" * 100_000),
    ]
    good = [
        cloud_license("fine", installedOnSandbox="true", evaluationOpportunitySize="5"),
        cloud_license(4242, appEntitlementId=77),  # a numeric cloudId and license id
    ]
    mocked.get(LICENSES_URL, json=license_page([cloud_license("p1")], PAGE2))
    mocked.get(URL2, json=license_page([cloud_license("p2")], PAGE3))
    mocked.get(URL3, body=raw_page(bad + good), content_type="application/json")
    connection = connect(acme)
    run = run_until_done(SyncRun.objects.get(connection=connection).id)

    assert run.outcome == Outcome.SUCCEEDED and run.error == ""
    assert (run.pages, run.licenses_seen, run.skipped_invalid) == (3, 12, 8)
    assert run.accounts_created == 4  # p1, p2, fine, 4242
    reasons = {(r["license"], r["field"]) for r in run.skipped_reasons}
    assert reasons == {
        ("appEntitlementId ent-nan-text", "evaluationOpportunitySize"),
        ("appEntitlementId ent-nan-json", "evaluationOpportunitySize"),
        ("appEntitlementId ent-huge", "daysToConvertEval"),
        ("appEntitlementId ent-nul-company", "contactDetails.company"),
        ("appEntitlementId 'ent-nul-cloud\\x00'", "cloudId"),
        ("appEntitlementId ent-surrogate", "addonName"),
        ("appEntitlementId ent-tier", "tier"),
        ("appEntitlementId ent-long", "addonName"),
    }
    traits = {a.tracking_id: a.traits for a in Account.objects.filter(product=acme.product)}
    assert set(traits) == {"p1", "p2", "fine", "4242"}
    assert traits["fine"]["am.installedOnSandbox"] is True
    assert traits["fine"]["am.evaluationOpportunitySize"] == 5
    assert traits["4242"]["am.appEntitlementId"] == "77"

    call_command("marketplace_status", "--product", str(acme.product.id), "--json")
    status = json.loads(capsys.readouterr().out)
    shown = status["runs"][0]
    assert shown["skipped_invalid"] == 8 and len(shown["skipped_reasons"]) == 8
    assert {"license": "appEntitlementId ent-tier", "field": "tier"}.items() <= next(
        r for r in shown["skipped_reasons"] if r["field"] == "tier"
    ).items()


def test_numeric_license_ids_never_collapse_two_licenses(acme, mocked):
    active = cloud_license("site", appEntitlementId=101, appEntitlementNumber=None)
    cancelled = cloud_license(
        "site", appEntitlementId=102, appEntitlementNumber=None, status="cancelled",
        maintenanceEndDate="2030-01-01",
    )  # fmt: skip
    mocked.get(LICENSES_URL, json=license_page([active, cancelled]))
    connection = connect(acme)
    run_until_done(SyncRun.objects.get(connection=connection).id)
    refs = set(License.objects.filter(connection=connection).values_list("ref", flat=True))
    assert refs == {"appEntitlementId:101", "appEntitlementId:102"}
    traits = Account.objects.get(product=acme.product, tracking_id="site").traits
    assert traits["am.status"] == "active" and traits["am.appEntitlementId"] == "101"


def test_a_malformed_page_fails_the_run_keeps_earlier_pages_and_frees_the_connection(acme, mocked):
    pages = [license_page([cloud_license(f"p{n}")], f"{PAGE2}&n={n}") for n in range(4)]
    mocked.get(LICENSES_URL, json=pages[0])
    for n in range(1, 4):
        mocked.get(f"{URL2}&n={n - 1}", json=pages[n])
    mocked.get(f"{URL2}&n=3", json={"_links": "broken", "licenses": []})
    connection = connect(acme)
    run = run_until_done(SyncRun.objects.get(connection=connection).id)
    connection.refresh_from_db()

    assert run.outcome == Outcome.FAILED and "`_links` as str" in run.error
    assert run.pages == 4 and run.next_url == f"{URL2}&n=3"
    assert "`_links` as str" in connection.last_error and connection.sync_lease_until is None
    assert Account.objects.filter(product=acme.product).count() == 4  # earlier pages kept
    again = services.connection_sync_request(connection_id=connection.id, trigger="manual")
    assert again.started


def test_a_self_referencing_next_link_keeps_the_fetched_pages_and_sets_the_error(acme, mocked):
    mocked.get(LICENSES_URL, json=license_page([cloud_license("a")], PAGE2))
    mocked.get(URL2, json=license_page([cloud_license("b")], PAGE2))
    connection = connect(acme)
    run = run_until_done(SyncRun.objects.get(connection=connection).id)
    connection.refresh_from_db()
    assert run.outcome == Outcome.FAILED and "do not end" in run.error
    assert "do not end" in connection.last_error
    assert {a.tracking_id for a in Account.objects.filter(product=acme.product)} == {"a", "b"}


def test_an_unexpected_error_closes_the_run_with_it_and_frees_the_connection(
    acme, mocked, monkeypatch
):
    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(sync, "account_prefixed_traits_replace", broken)
    mocked.get(LICENSES_URL, json=license_page([cloud_license("x")]))
    connection = connect(acme)
    run = run_until_done(SyncRun.objects.get(connection=connection).id)
    connection.refresh_from_db()
    assert run.outcome == Outcome.FAILED and "RuntimeError" in run.error
    assert "RuntimeError" in connection.last_error and connection.sync_lease_until is None


def test_a_run_whose_worker_died_is_closed_when_its_lease_runs_out(acme, mocked):
    connection = connect(acme)
    run = SyncRun.objects.get(connection=connection)
    # A worker took the run, then died: its lease and the run's heartbeat stop moving.
    assert sync.lease_acquire(connection.id, "dead-worker")
    now = timezone.now()
    SyncRun.objects.filter(id=run.id).update(heartbeat_at=now, retry_at=now + services.LEASE)
    assert services.sync_runs_close_dead() == 0  # the lease still runs
    assert not services.connection_sync_request(
        connection_id=connection.id, trigger="manual"
    ).started

    past = now - timedelta(seconds=1)
    MarketplaceConnection.objects.filter(id=connection.id).update(sync_lease_until=past)
    SyncRun.objects.filter(id=run.id).update(retry_at=past)
    assert services.sync_runs_close_dead() == 1
    run.refresh_from_db()
    connection.refresh_from_db()
    assert run.outcome == Outcome.FAILED and "worker running this sync stopped" in run.error
    assert "worker running this sync stopped" in connection.last_error
    assert services.connection_sync_request(connection_id=connection.id, trigger="manual").started


def test_disconnect_stops_a_running_sync_before_its_next_request_and_nothing_is_written(
    acme, mocked
):
    connection = connect(acme)

    def page2_while_the_admin_disconnects(request):
        services.connections_disconnect(connection_ids=[connection.id])
        return 200, {}, json.dumps(license_page([cloud_license("p2")], PAGE3))

    mocked.get(LICENSES_URL, json=license_page([cloud_license("p1")], PAGE2))
    mocked.add_callback("GET", URL2, callback=page2_while_the_admin_disconnects)
    mocked.get(URL3, json=license_page([cloud_license("p3")]))
    run = run_until_done(SyncRun.objects.get(connection=connection).id)
    connection.refresh_from_db()

    assert [c.request.url for c in mocked.calls][-1] == URL2  # page 3 was never asked for
    assert run.outcome == Outcome.STOPPED and "disconnected" in run.error
    assert not Account.objects.filter(product=acme.product).exists()
    assert connection.last_success_at is None and connection.last_error == ""
    assert connection.state == MarketplaceConnection.State.DISCONNECTED


def test_the_last_error_is_cleared_by_the_next_success_and_a_run_says_only_what_it_did(
    acme, mocked
):
    mocked.get(LICENSES_URL, status=503)
    mocked.get(LICENSES_URL, json=license_page([cloud_license("ok")]))
    connection = connect(acme)
    run = SyncRun.objects.get(connection=connection)
    step = sync.sync_run_execute(run_id=run.id)
    run.refresh_from_db()
    connection.refresh_from_db()
    assert step.retry_in == sync.TASK_BACKOFF_BASE and run.outcome == Outcome.RETRYING
    assert "retry 1 of 10" in run.error and "503" in connection.last_error

    run = run_until_done(run.id)
    connection.refresh_from_db()
    assert run.outcome == Outcome.SUCCEEDED and run.error == "" and run.retries == 1
    assert connection.last_error == "" and connection.last_error_at is None
    assert connection.last_success_at is not None
