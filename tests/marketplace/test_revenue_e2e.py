"""Over real HTTP against the fake marketplace: licenses, transactions and uninstall feedback in
one run, through a 429 with Retry-After on the transactions and a 503 on the feedback."""

from collections import defaultdict
from datetime import timedelta

from django.utils import timezone

from engagement.models import Account
from marketplace import services
from marketplace.models import SyncRun, Transaction, Uninstall
from tests.marketplace.conftest import EMAIL, TOKEN, VENDOR_ID, run_until_done


def test_transactions_and_feedback_sync_over_http_through_rate_limits(
    acme, fake_marketplace, slept
):
    fake = fake_marketplace
    resolved = services.connection_details_check(
        email=EMAIL, api_token=TOKEN, vendor_id=VENDOR_ID, product_id=fake.product_id
    )
    connection = services.connection_configure(
        product_id=acme.product.id, email=EMAIL, api_token=TOKEN, vendor_id=VENDOR_ID,
        developer_id=resolved.developer_id, marketplace_product_id=resolved.product_id,
    )  # fmt: skip
    fake.inject(429, count=1, retry_after=3, endpoint="transactions")
    fake.inject(503, count=1, endpoint="feedback")

    run = run_until_done(SyncRun.objects.get(connection=connection).id)

    cloud = [t for t in fake.transactions if "cloudId" in t]
    uninstalls = [f for f in fake.feedback if f["feedbackType"] == "uninstall" and "cloudId" in f]
    assert run.outcome == "succeeded", run.error
    assert run.retries == 2 and slept == []
    assert run.transactions_seen == len(fake.transactions) > 0
    assert run.transactions_skipped == len(fake.transactions) - len(cloud) > 0
    assert run.feedback_seen == sum(f["feedbackType"] == "uninstall" for f in fake.feedback)
    assert Transaction.objects.filter(connection=connection).count() == len(cloud)
    assert Uninstall.objects.filter(connection=connection).count() == len(uninstalls) > 0

    # Each account's latest sale and 12 months' sum, straight from the fake's lines.
    today = timezone.now().date()
    by_site = defaultdict(list)
    for line in cloud:
        by_site[line["cloudId"]].append(line["purchaseDetails"])
    accounts = {a.tracking_id: a.traits for a in Account.objects.filter(product=acme.product)}
    checked = 0
    for site, lines in by_site.items():
        if site not in accounts:
            continue  # its license lost to another of the site (its lines still count below)
        traits = accounts[site]
        latest = max(p["saleDate"] for p in lines)
        assert traits["am.lastSaleDate"] == latest
        window = (today - timedelta(days=364)).isoformat()
        expected = sum(p["vendorAmount"] for p in lines if window <= p["saleDate"] <= str(today))
        assert abs(traits["am.vendorAmount12m"] - round(expected, 2)) < 0.006
        checked += 1
    assert checked > 100
    # No personal data from the transactions or the feedback anywhere.
    text = str(list(Transaction.objects.values_list())) + str(list(Uninstall.objects.values_list()))
    text += str(list(accounts.values()))
    assert "@" not in text and "Admin " not in text and "Feedback from" not in text
