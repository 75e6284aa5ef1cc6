"""End to end over real HTTP: connect and sync against the fake marketplace server."""

from collections import defaultdict

from django.core.management import call_command

from engagement.models import Account
from marketplace import mapping, revenue
from marketplace.models import MarketplaceConnection, SyncRun
from tests.marketplace.conftest import EMAIL, TOKEN, VENDOR_ID, run_until_done


def expected_winners(fake) -> dict[str, dict]:
    by_cloud = defaultdict(list)
    for record in fake.licenses:
        if mapping.cloud_id(record):
            by_cloud[record["cloudId"]].append(record)
    return {
        cloud_id: max((mapping.license_map(r) for r in records), key=lambda m: m.rank).traits
        for cloud_id, records in by_cloud.items()
    }


def test_connect_and_full_sync_over_http(acme, fake_marketplace, slept):
    last_app = fake_marketplace.apps[-1]  # on the second page of the listing (60 apps)
    fake_marketplace.licenses = [
        dict(r, productId=last_app["productId"]) for r in fake_marketplace.licenses
    ]
    call_command(
        "marketplace_connect",
        "--product",
        str(acme.product.id),
        "--email",
        EMAIL,
        "--token",
        TOKEN,
        "--vendor-id",
        VENDOR_ID,
        "--app-name",
        last_app["appName"],
    )
    connection = MarketplaceConnection.objects.get(product=acme.product)
    assert connection.marketplace_product_id == last_app["productId"]
    assert connection.developer_id == fake_marketplace.developer_id

    fake_marketplace.inject(429, count=2, retry_after=1)  # retried by the task, never slept on
    run = run_until_done(SyncRun.objects.get(connection=connection).id)

    total = len(fake_marketplace.licenses)
    without_cloud = sum(1 for r in fake_marketplace.licenses if "cloudId" not in r)
    winners = expected_winners(fake_marketplace)
    assert run.outcome == "succeeded", run.error
    assert run.pages == -(-total // 50) and run.licenses_seen == total
    assert run.skipped_without_cloud_id == without_cloud
    assert run.accounts_created == len(winners) and run.accounts_matched == 0
    assert run.retries == 2 and run.error == "" and slept == []
    # The license traits (the revenue traits are test_revenue_e2e's: no sale is of this app).
    accounts = {
        a.tracking_id: {k: v for k, v in a.traits.items() if k not in revenue.REVENUE_TRAITS}
        for a in Account.objects.filter(product=acme.product)
    }
    # Known only from their licenses, the accounts are named by the winning license's company.
    named = {cid: {**traits, "name": traits["am.company"]} for cid, traits in winners.items()}
    assert accounts == named


def test_scheduled_sync_gets_only_recent_licenses_and_401_pauses(acme, fake_marketplace, slept):
    call_command(
        "marketplace_connect",
        "--product",
        str(acme.product.id),
        "--email",
        EMAIL,
        "--token",
        TOKEN,
        "--vendor-id",
        VENDOR_ID,
        "--product-id",
        fake_marketplace.product_id,
    )
    connection = MarketplaceConnection.objects.get(product=acme.product)
    run_until_done(SyncRun.objects.get(connection=connection).id)

    from marketplace import services

    run = run_until_done(
        services.connection_sync_request(connection_id=connection.id, trigger="scheduled").run_id
    )
    recent = [
        r
        for r in fake_marketplace.licenses
        if r["lastUpdated"] >= run.last_updated_from.isoformat()
    ]
    assert run.outcome == "succeeded" and run.licenses_seen == len(recent) < len(
        fake_marketplace.licenses
    )

    fake_marketplace.set_token("rotated")
    run = run_until_done(
        services.connection_sync_request(connection_id=connection.id, trigger="manual").run_id
    )
    connection.refresh_from_db()
    assert run.outcome == "unauthorized" and connection.state == "requires_authentication"
