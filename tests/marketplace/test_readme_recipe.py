"""The marketplace recipe (docs/marketplace.md, linked from the README), as a newcomer walks it:
`make run` is already running (its workers started without MARKETPLACE_API_URL), its demo
account `acme` has activity, and the fake marketplace is connected to the demo product through
the connect command."""

import re
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from engagement.models import Account, Product
from engagement.services import Message, messages_apply
from marketplace import services
from marketplace.fake import FakeMarketplace
from marketplace.management.commands.fake_marketplace import DEMO_ACCOUNTS
from marketplace.models import MarketplaceConnection, SyncRun
from tests.marketplace.conftest import run_until_done

pytestmark = pytest.mark.both_databases


def now_ms() -> int:
    return int(time.time() * 1000)


ROOT = Path(__file__).resolve().parents[2]
WORKERS_URL = "https://api.atlassian.com"  # what the running workers were started with


@pytest.fixture
def demo(db, settings, tmp_path):
    """make run's demo product, with the account its printed curl lines create."""
    settings.DATA_DIR = tmp_path
    call_command("demo_credentials", "--base-url", "http://testserver", stdout=StringIO())
    product = Product.objects.get(name="Demo product")
    identify = Message(
        "identify", now_ms(), user_id="usr_123", group_id="acme", traits={"email": "a@acme.ex"}
    )
    messages_apply(product_id=product.id, messages=[identify])
    return product


@pytest.fixture
def fake(settings):
    fake = FakeMarketplace(licenses=500, accounts=DEMO_ACCOUNTS)
    fake.start()
    yield fake
    fake.stop()


def connect_through(fake: FakeMarketplace, product: Product, settings) -> SyncRun:
    """`echo fake-token | MARKETPLACE_API_URL=<fake> manage.py marketplace_connect ...`, while
    the workers keep the URL they were started with."""
    settings.MARKETPLACE_API_URL = fake.base_url
    call_command(
        "marketplace_connect", "--product", str(product.id), "--email", fake.email,
        "--token", fake.token, "--vendor-id", fake.vendor_id, "--app-key", "com.example.app0",
        stdout=StringIO(),
    )  # fmt: skip
    settings.MARKETPLACE_API_URL = WORKERS_URL
    return SyncRun.objects.get(connection__product=product)


def test_the_sync_asks_the_api_the_connection_was_checked_against(demo, fake, settings, slept):
    run = run_until_done(connect_through(fake, demo, settings).id)

    assert run.outcome == SyncRun.Outcome.SUCCEEDED, run.error
    assert run.licenses_seen == 500
    connection = MarketplaceConnection.objects.get(product=demo)
    assert connection.api_url == fake.base_url


def test_the_admin_and_the_status_show_the_api_a_connection_syncs_from(
    demo, fake, settings, admin_client
):
    connection = connect_through(fake, demo, settings).connection
    status = StringIO()
    call_command("marketplace_status", "--product", str(demo.id), stdout=status)

    assert f"api_url: {fake.base_url}" in status.getvalue()
    page = admin_client.get(f"/admin/marketplace/marketplaceconnection/{connection.id}/change/")
    assert page.status_code == 200 and fake.base_url in page.content.decode()


def test_the_fakes_licenses_match_the_demo_account_and_name_it(demo, fake, settings, slept):
    run = run_until_done(connect_through(fake, demo, settings).id)

    assert run.accounts_matched == 1
    acme = Account.objects.get(product=demo, tracking_id="acme")
    assert acme.traits["am.company"] == acme.traits["name"] == "Acme Inc."
    assert acme.traits["am.status"] == "active"
    assert acme.memberships.count() == 1  # the demo's user, beside the license


def test_accounts_made_from_licenses_are_named_by_the_company(demo, fake, settings, slept):
    run_until_done(connect_through(fake, demo, settings).id)

    made = Account.objects.filter(product=demo).exclude(tracking_id="acme")
    companies = {r["contactDetails"]["company"] for r in fake.licenses if "cloudId" in r}
    assert made.count() > 300
    for account in made:
        assert account.traits["name"] == account.traits["am.company"], account.tracking_id
        assert account.traits["name"] in companies


def test_an_identify_names_the_account_over_the_license_and_the_next_sync_keeps_it(
    demo, fake, settings, slept
):
    run_until_done(connect_through(fake, demo, settings).id)
    cloud_id = next(r["cloudId"] for r in fake.licenses if r.get("cloudId") not in (None, "acme"))
    group = Message("group", now_ms(), user_id="u1", group_id=cloud_id, traits={"name": "Umbrella"})
    messages_apply(product_id=demo.id, messages=[group])
    assert Account.objects.get(product=demo, tracking_id=cloud_id).traits["name"] == "Umbrella"
    connection = MarketplaceConnection.objects.get(product=demo)
    run = run_until_done(
        services.connection_sync_request(connection_id=connection.id, trigger="manual").run_id
    )

    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert Account.objects.get(product=demo, tracking_id=cloud_id).traits["name"] == "Umbrella"


def test_the_readme_makes_the_fake_misbehave_before_it_disconnects():
    # The README points to the recipe in docs/marketplace.md.
    readme = (ROOT / "README.md").read_text()
    assert "docs/marketplace.md#try-the-marketplace-connection-locally" in readme
    guide = (ROOT / "docs" / "marketplace.md").read_text()
    recipe = guide.split("## Try the marketplace connection locally", 1)[1].split("```")[1]
    steps = [line for line in recipe.splitlines() if line and not line.startswith("#")]

    def first(pattern: str) -> int:
        return next(i for i, line in enumerate(steps) if re.search(pattern, line))

    assert "make run" not in recipe.replace("make run printed", "")  # it is already running
    assert "create_product" not in recipe  # the demo product is the one used
    assert first("_fake/inject") < first("marketplace_connect")  # the first sync meets them
    assert first("_fake/token") < first("marketplace_disconnect")
    assert steps[-1].startswith(".venv/bin/python manage.py marketplace_disconnect")
