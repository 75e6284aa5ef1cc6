"""Revenue traits from sales transactions and uninstall feedback, computed by hand.

Today is fixed at 2026-06-30 (UTC), so "the last 365 days" are 2025-07-01 to 2026-06-30. Every
expected figure below is worked out in the comment beside it from the lines the marketplace
answers.
"""

import json
from datetime import date

import pytest
from django.db import connection as db

from engagement.models import Account
from marketplace import services, sync
from marketplace.models import License, MarketplaceConnection, SyncRun, Transaction, Uninstall
from tests.marketplace.conftest import (
    FEEDBACK_URL,
    LICENSES_URL,
    TRANSACTIONS_URL,
    cloud_license,
    connect,
    license_page,
    report_page,
    run_until_done,
    sale,
    uninstall,
)

pytestmark = pytest.mark.both_databases

TODAY = date(2026, 6, 30)
REVENUE = (
    "am.lastSaleDate",
    "am.lastSaleType",
    "am.billingPeriod",
    "am.mrr",
    "am.vendorAmount12m",
    "am.convertedFromEvaluation",
    "am.uninstalledAt",
    "am.uninstallReason",
)

LICENSES = [
    cloud_license("monthly"),
    cloud_license("annual"),
    cloud_license("refunded"),
    cloud_license("upgraded"),
    cloud_license("partial"),
    cloud_license(
        "academic", licenseType="ACADEMIC", daysToConvertEval="NA", evaluationSaleDate="NA"
    ),
    cloud_license("no-sales"),
]
SALES = [
    # monthly: three monthly sales of 20.00, the first exactly 365 days ago (outside the window)
    sale("monthly", "2025-06-30", "New", 20.0, start="2025-06-30", end="2025-07-30"),
    sale("monthly", "2026-05-30", "Renewal", 20.0, start="2026-05-30", end="2026-06-30"),
    sale("monthly", "2026-06-30", "Renewal", 20.0, start="2026-06-30", end="2026-07-30"),
    # annual: 1,200.00 a year ago (outside), 1,300.00 renewed 2025-07-01 (the window's first day)
    sale("annual", "2024-07-01", "New", 1200.0, period="Annual", start="2024-07-01",
         end="2025-07-01"),
    sale("annual", "2025-07-01", "Renewal", 1300.0, period="Annual", start="2025-07-01",
         end="2026-07-01"),
    # refunded: the June renewal (30.00) refunded in full two days later
    sale("refunded", "2026-05-10", "New", 30.0, start="2026-05-10", end="2026-06-10"),
    sale("refunded", "2026-06-10", "Renewal", 30.0, start="2026-06-10", end="2026-07-10"),
    sale("refunded", "2026-06-12", "Refund", -30.0, start="2026-06-10", end="2026-07-10"),
    # upgraded: an annual 600.00, upgraded mid-term for 450.00 (net of the unused part)
    sale("upgraded", "2025-09-01", "New", 600.0, period="Annual", start="2025-09-01",
         end="2026-09-01"),
    sale("upgraded", "2026-03-01", "Upgrade", 450.0, period="Annual", start="2026-03-01",
         end="2027-03-01"),
    # partial: an annual 240.00, 60.00 of it refunded for the rest of the term
    sale("partial", "2026-01-15", "New", 240.0, period="Annual", start="2026-01-15",
         end="2027-01-15"),
    sale("partial", "2026-02-01", "Refund", -60.0, period="Annual", start="2026-02-01",
         end="2027-01-15"),
    # academic: paid, but not a commercial license
    sale("academic", "2026-02-01", "New", 100.0, period="Annual", start="2026-02-01",
         end="2027-02-01"),
    # a data-center sale (no cloudId) and another app's sale: no account's
    sale(None, "2026-06-01", "New", 999.0, licenseId="SEN-1"),
    sale("monthly", "2026-06-29", "New", 777.0, productId="another-app"),
]  # fmt: skip
FEEDBACK = [
    uninstall("refunded", "2026-06-14", "cost"),
    uninstall("refunded", "2026-06-01", "bugs"),  # an earlier one: the latest counts
    uninstall("monthly", "2026-06-20", "expectations", feedbackType="disable"),  # not uninstall
    # no cloudId: found through its license's appEntitlementId
    uninstall(None, "2026-06-25", "not-meeting-needs", appEntitlementId="ent-upgraded"),
]

EXPECTED = {
    # 2026-06-30 renewal is the latest; mrr = 20.00; 12 months = 20 + 20 (2025-06-30 is out)
    "monthly": {"am.lastSaleDate": "2026-06-30", "am.lastSaleType": "renewal",
                "am.billingPeriod": "monthly", "am.mrr": 20.0, "am.vendorAmount12m": 40.0,
                "am.convertedFromEvaluation": True},
    # mrr = 1300 / 12 = 108.333... -> 108.33; 12 months = 1300 (2024-07-01 is out)
    "annual": {"am.lastSaleDate": "2025-07-01", "am.lastSaleType": "renewal",
               "am.billingPeriod": "annual", "am.mrr": 108.33, "am.vendorAmount12m": 1300.0,
               "am.convertedFromEvaluation": True},
    # latest line is the refund; the latest sale (06-10) was refunded: mrr 0; 30 + 30 - 30 = 30
    "refunded": {"am.lastSaleDate": "2026-06-12", "am.lastSaleType": "refund",
                 "am.billingPeriod": "monthly", "am.mrr": 0.0, "am.vendorAmount12m": 30.0,
                 "am.convertedFromEvaluation": True, "am.uninstalledAt": "2026-06-14",
                 "am.uninstallReason": "cost"},
    # mrr = 450 / 12 = 37.50; 12 months = 600 + 450
    "upgraded": {"am.lastSaleDate": "2026-03-01", "am.lastSaleType": "upgrade",
                 "am.billingPeriod": "annual", "am.mrr": 37.5, "am.vendorAmount12m": 1050.0,
                 "am.convertedFromEvaluation": True, "am.uninstalledAt": "2026-06-25",
                 "am.uninstallReason": "not-meeting-needs"},
    # a partial refund: mrr = (240 - 60) / 12 = 15.00; 12 months = 240 - 60 = 180
    "partial": {"am.lastSaleDate": "2026-02-01", "am.lastSaleType": "refund",
                "am.billingPeriod": "annual", "am.mrr": 15.0, "am.vendorAmount12m": 180.0,
                "am.convertedFromEvaluation": True},
    # not commercial: mrr 0 whatever it paid; its evaluation did not convert
    "academic": {"am.lastSaleDate": "2026-02-01", "am.lastSaleType": "new",
                 "am.billingPeriod": "annual", "am.mrr": 0.0, "am.vendorAmount12m": 100.0,
                 "am.convertedFromEvaluation": False},
    # an active commercial license with no sale yet: no mrr to tell, no sale traits
    "no-sales": {"am.convertedFromEvaluation": True},
}  # fmt: skip


@pytest.fixture(autouse=True)
def today(monkeypatch):
    monkeypatch.setattr(sync, "_today", lambda: TODAY)


def revenue_of(acme) -> dict[str, dict]:
    return {
        a.tracking_id: {k: v for k, v in a.traits.items() if k in REVENUE}
        for a in Account.objects.filter(product=acme.product)
    }


def serve(mocked, licenses=LICENSES, sales=SALES, feedback=FEEDBACK) -> None:
    mocked.get(LICENSES_URL, json=license_page(licenses))
    mocked.replace("GET", TRANSACTIONS_URL, json=report_page("transactions", sales))
    mocked.replace("GET", FEEDBACK_URL, json=report_page("feedback", feedback))


def first_sync(acme, mocked) -> SyncRun:
    serve(mocked)
    return run_until_done(SyncRun.objects.get(connection=connect(acme)).id)


def test_hand_computed_traits_for_monthly_annual_refunded_upgraded_and_non_commercial(acme, mocked):
    run = first_sync(acme, mocked)

    assert run.outcome == SyncRun.Outcome.SUCCEEDED, run.error
    assert revenue_of(acme) == EXPECTED
    assert (run.transactions_seen, run.transactions_skipped, run.feedback_seen) == (15, 2, 4)
    assert run.stage == SyncRun.Stage.TRAITS and run.next_url == ""
    # only the connected app, only for the uninstalls asked for
    asked = {c.request.url.split("?")[0]: c.request.url for c in mocked.calls}
    assert "productId=acd011b1-1111-45bc-902a-247046a11111" in asked[TRANSACTIONS_URL]
    assert "type=uninstall" in asked[FEEDBACK_URL]


def test_amounts_are_json_numbers_and_dates_iso_days(acme, mocked):
    first_sync(acme, mocked)
    account = Account.objects.get(product=acme.product, tracking_id="annual")
    with db.cursor() as cursor:
        cursor.execute("SELECT traits FROM engagement_account WHERE id = %s", [account.id])
        stored = cursor.fetchone()[0]
    stored = stored if isinstance(stored, str) else json.dumps(stored)
    assert '"am.mrr": 108.33' in stored and '"am.vendorAmount12m": 1300.0' in stored
    assert '"am.lastSaleDate": "2025-07-01"' in stored


def test_no_contact_billing_partner_or_submitter_is_stored_anywhere(acme, mocked):
    first_sync(acme, mocked)
    stored = [
        *Transaction.objects.values_list(),
        *Uninstall.objects.values_list(),
        *License.objects.values_list("traits", flat=True),
        *Account.objects.filter(product=acme.product).values_list("traits", flat=True),
    ]
    text = str(stored)
    for personal in ("@", "Ana Admin", "Bill Payer", "Pat Partner", "Lee Leaver", "spreadsheet"):
        assert personal not in text
    assert Transaction.objects.count() == 13  # the data-center and the other app's are not kept
    assert Uninstall.objects.count() == 3  # the disable is not kept


def test_a_sync_that_finds_nothing_changed_changes_nothing(acme, mocked):
    first_sync(acme, mocked)
    before = {
        a.tracking_id: (a.traits, a.trait_times, a.updated_at)
        for a in Account.objects.filter(product=acme.product)
    }
    connection = MarketplaceConnection.objects.get(product=acme.product)

    again = services.connection_sync_request(connection_id=connection.id, trigger="manual")
    run = run_until_done(again.run_id)

    assert run.outcome == SyncRun.Outcome.SUCCEEDED and run.licenses_seen == len(LICENSES)
    assert run.accounts_updated == 0
    after = {
        a.tracking_id: (a.traits, a.trait_times, a.updated_at)
        for a in Account.objects.filter(product=acme.product)
    }
    assert after == before  # no trait written, updated_at (what a score refresh reads) kept


def test_a_new_refund_changes_the_four_traits_on_the_next_sync(acme, mocked):
    first_sync(acme, mocked)
    connection = MarketplaceConnection.objects.get(product=acme.product)
    untouched = Account.objects.get(product=acme.product, tracking_id="annual").updated_at
    # The June renewal of "monthly" (20.00 from 2026-06-30) is refunded; the schedule's updated
    # sync sees only that line (lastUpdated) and no changed license.
    refund = sale("monthly", "2026-06-30", "Refund", -20.0, start="2026-06-30", end="2026-07-30",
                  line="2")  # fmt: skip
    serve(mocked, licenses=[], sales=[refund], feedback=[])

    run = run_until_done(
        services.connection_sync_request(connection_id=connection.id, trigger="scheduled").run_id
    )

    assert run.outcome == SyncRun.Outcome.SUCCEEDED and run.mode == "updated"
    assert run.accounts_updated == 1
    # latest line: the refund of the same day; the latest sale was refunded: mrr 0;
    # 12 months: 20 + 20 - 20 = 20
    assert revenue_of(acme)["monthly"] == {
        **EXPECTED["monthly"],
        "am.lastSaleType": "refund",
        "am.lastSaleDate": "2026-06-30",
        "am.mrr": 0.0,
        "am.vendorAmount12m": 20.0,
    }
    assert revenue_of(acme)["annual"] == EXPECTED["annual"]
    assert Account.objects.get(product=acme.product, tracking_id="annual").updated_at == untouched
    transactions_call = [c for c in mocked.calls if c.request.url.startswith(TRANSACTIONS_URL)]
    assert f"lastUpdated={run.last_updated_from.isoformat()}" in transactions_call[-1].request.url


def test_the_window_moves_with_the_days_without_new_data(acme, mocked, monkeypatch):
    first_sync(acme, mocked)
    connection = MarketplaceConnection.objects.get(product=acme.product)
    # A day later the annual's 2025-07-01 renewal (1,300.00) is 365 days old: out.
    monkeypatch.setattr(sync, "_today", lambda: date(2026, 7, 1))
    serve(mocked, licenses=[], sales=[], feedback=[])

    run = run_until_done(
        services.connection_sync_request(connection_id=connection.id, trigger="scheduled").run_id
    )

    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert revenue_of(acme)["annual"]["am.vendorAmount12m"] == 0.0
    assert revenue_of(acme)["monthly"]["am.vendorAmount12m"] == 40.0  # 05-30 and 06-30 stay


def test_an_erased_account_is_not_brought_back_by_the_traits_stage(acme, mocked):
    first_sync(acme, mocked)
    connection = MarketplaceConnection.objects.get(product=acme.product)
    Account.objects.filter(product=acme.product, tracking_id="monthly").delete()
    serve(mocked, licenses=[], sales=[], feedback=[])

    run = run_until_done(
        services.connection_sync_request(connection_id=connection.id, trigger="scheduled").run_id
    )

    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert not Account.objects.filter(product=acme.product, tracking_id="monthly").exists()
