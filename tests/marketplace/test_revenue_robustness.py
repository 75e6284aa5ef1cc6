"""The sync's robustness on the transactions and feedback lists: a poisoned transaction is
skipped with its reason, 429 (with Retry-After) and 502-504 are retried from the page the run
stopped at, a malformed page fails the run, and a disconnect mid-sync writes nothing more."""

import json

import pytest

from engagement.models import Account
from marketplace import services, sync
from marketplace.models import MarketplaceConnection, SyncRun, Transaction
from tests.marketplace.conftest import (
    FEEDBACK_URL,
    LICENSES_URL,
    TRANSACTIONS_URL,
    cloud_license,
    connect,
    license_page,
    mock_vendor,
    report_page,
    run_until_done,
    sale,
    uninstall,
)

pytestmark = pytest.mark.both_databases

Outcome = SyncRun.Outcome
Stage = SyncRun.Stage
PAGE2 = "/rest/3/reporting/developer-space/D/sales/transactions?productId=P&offset=50&limit=50"
URL2 = "https://marketplace.test/marketplace" + PAGE2
PAGE3 = "/rest/3/reporting/developer-space/D/sales/transactions?productId=P&offset=100&limit=50"
URL3 = "https://marketplace.test/marketplace" + PAGE3


def first_run(acme) -> SyncRun:
    return SyncRun.objects.get(connection=connect(acme))


def test_a_poisoned_transaction_is_skipped_with_its_reason_and_the_rest_is_kept(acme, mocked):
    mocked.get(LICENSES_URL, json=license_page([cloud_license("site")]))
    good = sale("site", "2026-06-01", "New", 25.0)
    poisoned = [
        sale("site", "2026-06-02", "New", "__NAN__", line="nan"),
        sale("site", "2026-06-03", "New", "__BIG__", line="big"),
        sale("site", "2026-13-45", "New", 5.0, line="bad-date"),
        sale("site", "2026-06-04", "Transfer", 5.0, line="kind"),
        sale("site", "2026-06-05", "New", 5.0, line="nul", cloudId="site\x00"),
        dict(sale("site", "2026-06-06", "New", 5.0, line="noid"), transactionId=None),
        dict(sale("site", "2026-06-07", "New", 5.0, line="nodetails"), purchaseDetails="x"),
    ]
    text = json.dumps(report_page("transactions", [*poisoned, good]))
    text = text.replace('"__NAN__"', "NaN").replace('"__BIG__"', "9" * 5000)
    mocked.replace("GET", TRANSACTIONS_URL, body=text, content_type="application/json")

    run = run_until_done(first_run(acme).id)

    assert run.outcome == Outcome.SUCCEEDED and run.error == ""
    assert (run.transactions_seen, run.skipped_invalid) == (8, 7)
    reasons = {(r["license"], r["field"]) for r in run.skipped_reasons}
    assert reasons == {
        ("transaction IN-site-2026-06-02-New nan", "purchaseDetails.vendorAmount"),
        ("transaction IN-site-2026-06-03-New big", "purchaseDetails.vendorAmount"),
        ("transaction IN-site-2026-13-45-New bad-date", "purchaseDetails.saleDate"),
        ("transaction IN-site-2026-06-04-Transfer kind", "purchaseDetails.saleType"),
        ("transaction IN-site-2026-06-05-New nul", "cloudId"),
        ("transaction noid", "transactionId"),
        ("transaction IN-site-2026-06-07-New nodetails", "purchaseDetails"),
    }
    assert list(Transaction.objects.values_list("line_item_id", flat=True)) == ["1"]
    traits = Account.objects.get(product=acme.product, tracking_id="site").traits
    assert traits["am.lastSaleDate"] == "2026-06-01" and traits["am.vendorAmount12m"] >= 0


@pytest.mark.parametrize(
    ("status", "headers", "wait"),
    [(429, {"Retry-After": "7"}, 7.0), (502, {}, 2.0), (503, {}, 2.0), (504, {}, 2.0)],
)
def test_transactions_429_and_502_to_504_wait_and_resume_from_the_page_they_stopped_at(
    acme, mocked, slept, status, headers, wait
):
    mocked.get(LICENSES_URL, json=license_page([cloud_license("site")]))
    page1 = report_page("transactions", [sale("site", "2026-05-01", "New", 10.0)], PAGE2)
    mocked.replace("GET", TRANSACTIONS_URL, json=page1)
    mocked.get(URL2, status=status, headers=headers)
    run = first_run(acme)

    step = sync.sync_run_execute(run_id=run.id)
    run.refresh_from_db()

    assert step.retry_in == wait and run.outcome == Outcome.RETRYING
    assert (run.stage, run.next_url, run.transactions_seen) == (Stage.TRANSACTIONS, URL2, 1)
    assert str(status) in run.error and slept == []
    page2 = report_page("transactions", [sale("site", "2026-06-01", "Renewal", 10.0)])
    mocked.replace("GET", URL2, json=page2)
    calls_before = len(mocked.calls)

    run = run_until_done(run.id)

    assert run.outcome == Outcome.SUCCEEDED and run.retries == 1
    asked = [c.request.url.split("?")[0] for c in mocked.calls[calls_before:]]
    # the first transactions page was not asked for again; then the feedback and the licenses
    assert asked == [URL2.split("?")[0], FEEDBACK_URL, LICENSES_URL]
    assert run.transactions_seen == 2
    traits = Account.objects.get(product=acme.product, tracking_id="site").traits
    assert (traits["am.lastSaleDate"], traits["am.lastSaleType"]) == ("2026-06-01", "renewal")


def test_feedback_rate_limited_waits_its_retry_after(acme, mocked, slept):
    mocked.get(LICENSES_URL, json=license_page([cloud_license("site", status="cancelled")]))
    mocked.replace("GET", FEEDBACK_URL, status=429, headers={"Retry-After": "30"})
    run = first_run(acme)

    step = sync.sync_run_execute(run_id=run.id)
    run.refresh_from_db()
    assert step.retry_in == 30.0 and run.stage == Stage.FEEDBACK

    gone = report_page("feedback", [uninstall("site", "2026-06-01")])
    mocked.replace("GET", FEEDBACK_URL, json=gone)
    run = run_until_done(run.id)
    traits = Account.objects.get(product=acme.product, tracking_id="site").traits
    assert run.outcome == Outcome.SUCCEEDED and traits["am.uninstalledAt"] == "2026-06-01"


def test_a_malformed_transactions_page_fails_the_run_and_frees_the_connection(acme, mocked):
    mocked.get(LICENSES_URL, json=license_page([cloud_license("site")]))
    mocked.replace("GET", TRANSACTIONS_URL, json={"_links": {}, "transactions": "none"})
    run = run_until_done(first_run(acme).id)
    connection = MarketplaceConnection.objects.get(product=acme.product)

    assert run.outcome == Outcome.FAILED and "no `transactions` list" in run.error
    assert "no `transactions` list" in connection.last_error
    assert connection.sync_lease_until is None and connection.last_success_at is None
    assert not any("/licenses" in c.request.url for c in mocked.calls)  # the run stopped there
    assert services.connection_sync_request(connection_id=connection.id, trigger="manual").started


def test_disconnect_during_the_transactions_stops_before_the_next_request(acme, mocked):
    connection = connect(acme)

    def page2_while_the_admin_disconnects(request):
        services.connections_disconnect(connection_ids=[connection.id])
        body = report_page("transactions", [sale("site", "2026-06-02", "Renewal", 9.0)], PAGE3)
        return 200, {}, json.dumps(body)

    mocked.get(LICENSES_URL, json=license_page([cloud_license("site")]))
    page1 = report_page("transactions", [sale("site", "2026-06-01", "New", 9.0)], PAGE2)
    mocked.replace("GET", TRANSACTIONS_URL, json=page1)
    mocked.add_callback("GET", URL2, callback=page2_while_the_admin_disconnects)
    mocked.get(URL3, json=report_page("transactions", []))

    run = run_until_done(SyncRun.objects.get(connection=connection).id)
    connection.refresh_from_db()

    # page 3, the feedback and the licenses were never asked for
    assert [c.request.url for c in mocked.calls][-1] == URL2
    assert run.outcome == Outcome.STOPPED and "disconnected" in run.error
    assert run.stage == Stage.TRANSACTIONS
    # pages 1 and 2 were fetched for one commit, which the disconnect dropped
    assert not Transaction.objects.exists()
    assert not Account.objects.filter(product=acme.product).exists()
    assert connection.state == MarketplaceConnection.State.DISCONNECTED
    assert connection.last_success_at is None


def test_a_scheduled_full_sync_continues_a_failed_one_in_its_stage(acme, mocked, slept):
    mocked.get(LICENSES_URL, json=license_page([cloud_license("site")]))
    page1 = report_page("transactions", [sale("site", "2026-05-01", "New", 10.0)], PAGE2)
    mocked.replace("GET", TRANSACTIONS_URL, json=page1)
    mocked.get(URL2, status=502)
    failed = run_until_done(first_run(acme).id)
    assert failed.outcome == Outcome.FAILED and failed.stage == Stage.TRANSACTIONS

    mocked.replace("GET", URL2, json=report_page("transactions", []))
    connection = MarketplaceConnection.objects.get(product=acme.product)
    result = services.connection_sync_request(connection_id=connection.id, trigger="scheduled")
    run = run_until_done(result.run_id)

    assert run.outcome == Outcome.SUCCEEDED and run.note.startswith("Continues run")
    # it went on from the transactions' second page, then the feedback and the licenses
    assert (run.transactions_seen, run.licenses_seen) == (0, 1)
    assert not any(c.request.url == TRANSACTIONS_URL for c in mocked.calls[-3:])
    traits = Account.objects.get(product=acme.product, tracking_id="site").traits
    assert traits["am.lastSaleDate"] == "2026-05-01"


def test_a_refused_transactions_list_skips_it_and_the_licenses_still_sync(acme, mocked):
    # Sales reporting is a permission of its own: an account may read licenses and not sales.
    mocked.replace("GET", TRANSACTIONS_URL, status=403)
    mocked.get(LICENSES_URL, json=license_page([cloud_license("site")]))
    run = run_until_done(first_run(acme).id)
    connection = MarketplaceConnection.objects.get(product=acme.product)

    assert run.outcome == Outcome.SUCCEEDED and run.licenses_seen == 1
    assert "Skipped the sales transactions" in run.note and "403" in run.note
    assert "Skipped the sales transactions" in connection.last_error
    assert connection.last_success_at is not None
    assert Account.objects.get(product=acme.product, tracking_id="site").traits["am.status"]
    assert any(c.request.url.startswith(FEEDBACK_URL) for c in mocked.calls)


def test_test_connection_reports_a_refused_sales_list_without_failing(acme, mocked):
    connection = connect(acme)
    mock_vendor(mocked)
    mocked.get(LICENSES_URL, json=license_page([], total=3))
    assert "sales and uninstall feedback reachable" in services.connection_test(
        connection_id=connection.id
    )
    mocked.replace("GET", TRANSACTIONS_URL, status=403)

    answer = services.connection_test(connection_id=connection.id)

    assert answer.startswith("Connection works: Example Timesheets") and "3 licenses" in answer
    assert "refused (403): sales transactions" in answer
    asked = [c.request.url for c in mocked.calls if c.request.url.startswith(TRANSACTIONS_URL)]
    assert "limit=1" in asked[-1]
