"""Marketplace actors: Vera, a vendor with one app, faked with `responses` or served over HTTP."""

from __future__ import annotations

import time

import pytest
import responses

from marketplace import services, sync
from marketplace.fake import FakeMarketplace
from marketplace.models import MarketplaceConnection, SyncRun

BASE = "https://marketplace.test"
API = f"{BASE}/marketplace/rest/3"
EMAIL = "vera@vendor.example"
TOKEN = "vera-token-1"
VENDOR_ID = "1212"
DEVELOPER_ID = "d0d0d0d0-0000-4000-8000-000000000001"
PRODUCT_ID = "acd011b1-1111-45bc-902a-247046a11111"
LICENSES_URL = f"{API}/reporting/developer-space/{DEVELOPER_ID}/licenses"
TRANSACTIONS_URL = f"{API}/reporting/developer-space/{DEVELOPER_ID}/sales/transactions"
FEEDBACK_URL = f"{API}/reporting/developer-space/{DEVELOPER_ID}/feedback/details"


def cloud_license(cloud_id: str, **fields) -> dict:
    """A cloud license with the documented fields; keyword arguments override or add."""
    record = {
        "appEntitlementId": f"ent-{cloud_id}",
        "appEntitlementNumber": f"E-{cloud_id}",
        "cloudId": cloud_id,
        "cloudSiteHostname": f"{cloud_id}.atlassian.net",
        "addonKey": "com.example.timesheets",
        "productId": PRODUCT_ID,
        "addonName": "Example Timesheets",
        "hosting": "Cloud",
        "appEdition": "Standard",
        "lastUpdated": "2026-05-03",
        "licenseType": "COMMERCIAL",
        "maintenanceStartDate": "2026-04-12",
        "maintenanceEndDate": "2026-05-12",
        "status": "active",
        "tier": "50 Users",
        "contactDetails": {
            "company": "Acme Corp",
            "country": "Germany",
            "region": "EMEA",
            "technicalContact": {"email": "admin@acme.example", "name": "Ana Admin"},
        },
        "evaluationOpportunitySize": "50",
        "daysToConvertEval": "2",
        "evaluationStartDate": "2026-03-12",
        "evaluationEndDate": "2026-04-10",
        "evaluationSaleDate": "2026-04-12",
        "parentProductName": "Jira",
        "parentProductEdition": "Premium",
        "parentProductBillingCycle": "MONTHLY",
        "installedOnSandbox": "No",
    }
    record.update(fields)
    return record


def datacenter_license(number: int) -> dict:
    return {
        "addonLicenseId": str(number),
        "licenseId": f"SEN-{number}",
        "hosting": "Data Center",
        "status": "active",
        "productId": PRODUCT_ID,
    }


def license_page(licenses: list[dict], next_href: str | None = None, total: int | None = None):
    body = {"_links": {"self": {"href": "/rest/3/reporting/..."}}, "licenses": licenses}
    if next_href:
        body["_links"]["next"] = {"href": next_href}
    if total is not None:
        body["totalCount"] = total
    return body


@pytest.fixture(autouse=True)
def marketplace_base(settings):
    settings.MARKETPLACE_API_URL = BASE


@pytest.fixture
def slept(monkeypatch) -> list[float]:
    """Whatever asked to sleep (nothing should: waits are task countdowns)."""
    delays: list[float] = []
    monkeypatch.setattr(time, "sleep", delays.append)
    return delays


def report_page(key: str, records: list, next_href: str | None = None) -> dict:
    """A page of transactions or feedback in the documented envelope."""
    body = {"_links": {"self": {"href": f"/rest/3/reporting/{key}"}}, key: records}
    if next_href:
        body["_links"]["next"] = {"href": next_href}
    return body


def sale(
    cloud_id: str | None,
    sale_date: str,
    sale_type: str,
    vendor_amount: float,
    *,
    period: str = "Monthly",
    start: str | None = None,
    end: str | None = None,
    line: str = "1",
    **fields,
) -> dict:
    """A transaction line in the documented shape (contacts included, which must not be kept)."""
    record = {
        "transactionId": f"IN-{cloud_id}-{sale_date}-{sale_type}",
        "transactionLineItemId": line,
        "appEntitlementId": f"ent-{cloud_id}",
        "appEntitlementNumber": f"E-{cloud_id}",
        "addonKey": "com.example.timesheets",
        "productId": PRODUCT_ID,
        "lastUpdated": sale_date,
        "paymentStatus": "Paid",
        "customerDetails": {
            "company": "Acme Corp",
            "country": "Germany",
            "technicalContact": {"email": "admin@acme.example", "name": "Ana Admin"},
            "billingContact": {"email": "bill@acme.example", "name": "Bill Payer"},
        },
        "partnerDetails": {
            "partnerName": "Partner Co",
            "billingContact": {"email": "partner@partner.example", "name": "Pat Partner"},
        },
        "purchaseDetails": {
            "saleDate": sale_date,
            "saleType": sale_type,
            "billingPeriod": period,
            "licenseType": "COMMERCIAL",
            "hosting": "Cloud",
            "tier": "50 Users",
            "purchasePrice": vendor_amount,
            "vendorAmount": vendor_amount,
            "maintenanceStartDate": start or sale_date,
            "maintenanceEndDate": end or sale_date,
        },
    }
    if cloud_id is not None:
        record["cloudId"] = cloud_id
    record.update(fields)
    return record


def uninstall(cloud_id: str | None, day: str, reason: str = "cost", **fields) -> dict:
    record = {
        "addonKey": "com.example.timesheets",
        "productId": PRODUCT_ID,
        "hosting": "Cloud",
        "date": day,
        "feedbackType": "uninstall",
        "reasonKey": reason,
        "reason": "Too expensive",
        "message": "We moved to a spreadsheet, call me on +1 555 0100",
        "email": "leaver@acme.example",
        "fullName": "Lee Leaver",
        "appEntitlementId": f"ent-{cloud_id}",
    }
    if cloud_id is not None:
        record["cloudId"] = cloud_id
    record.update(fields)
    return record


@pytest.fixture
def mocked(slept):
    """The marketplace faked with `responses`; transactions and feedback answer an empty page
    until a test replaces them (`mocked.replace("GET", TRANSACTIONS_URL, json=...)`)."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.get(TRANSACTIONS_URL, json=report_page("transactions", []))
        rsps.get(FEEDBACK_URL, json=report_page("feedback", []))
        yield rsps


def mock_vendor(rsps, apps: list[dict] | None = None) -> None:
    rsps.get(f"{API}/developer-space/vendor/{VENDOR_ID}", json={"developerId": DEVELOPER_ID})
    items = apps or [
        {
            "productId": PRODUCT_ID,
            "appKey": "com.example.timesheets",
            "developerId": DEVELOPER_ID,
            "appName": "Example Timesheets",
        },
        {
            "productId": "other-product",
            "appKey": "com.example.other",
            "developerId": DEVELOPER_ID,
            "appName": "Other App",
        },
    ]
    rsps.get(
        f"{API}/product-listing/developer-space/{DEVELOPER_ID}",
        json={"links": {"self": "/rest/3/product-listing/..."}, "items": items},
    )


def connect(tenant, *, captured=None) -> MarketplaceConnection:
    """Vera's valid details saved for this tenant's product (no HTTP: details already checked)."""
    return services.connection_configure(
        product_id=tenant.product.id,
        email=EMAIL,
        api_token=TOKEN,
        vendor_id=VENDOR_ID,
        developer_id=DEVELOPER_ID,
        marketplace_product_id=PRODUCT_ID,
        app_name="Example Timesheets",
    )


def run_until_done(run_id: int, *, max_steps: int = 20) -> SyncRun:
    """Execute a run as the worker would, retrying at once instead of after the countdown."""
    for _ in range(max_steps):
        step = sync.sync_run_execute(run_id=run_id)
        if step.retry_in is None:
            break
    return SyncRun.objects.get(id=run_id)


@pytest.fixture
def fake_marketplace(settings):
    """A fake marketplace served over real HTTP on a free local port."""
    fake = FakeMarketplace(licenses=300, apps=60, email=EMAIL, token=TOKEN, vendor_id=VENDOR_ID)
    settings.MARKETPLACE_API_URL = fake.start()
    yield fake
    fake.stop()
