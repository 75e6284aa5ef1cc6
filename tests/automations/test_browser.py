"""The automation pages in a real browser (Debian's chromium): a manager creates an automation,
reads its secret once, sends a test event and sees it delivered."""

import pytest

from automations.delivery import delivery_attempt
from automations.models import Automation
from engagement.models import ProductMembership
from tests.dashboard.conftest import scored, vera  # noqa: F401
from tests.dashboard.test_browser import SHOTS, pytestmark, signed_in_page  # noqa: F401


@pytest.fixture
def vera_manages(vera, acme):  # noqa: F811
    ProductMembership.objects.filter(user=vera).update(role=ProductMembership.Role.MANAGER)
    return vera


def test_a_manager_sets_up_an_automation_and_sees_the_test_event_delivered(
    live_server,
    scored,  # noqa: F811
    vera_manages,
    receiver,
):
    from playwright.sync_api import expect

    base = f"{live_server.url}/w/{scored.initech.product.workspaces.get().id}"
    url = receiver.url
    with signed_in_page(live_server) as page:
        page.get_by_role("link", name="Automations").click()
        page.get_by_label("Name").fill("Red hot accounts")
        page.get_by_label("Trigger").select_option("score_changed")
        page.get_by_label("Threshold").fill("10")
        page.get_by_label("URL").fill(url)
        page.get_by_role("button", name="Create").click()
        expect(page.locator("#new-secret")).to_contain_text("whsec_")
        page.get_by_role("button", name="Send a test event").click()
        expect(page.locator("#deliveries")).to_contain_text("automation.test")
    # What the automations worker does (outside the browser's event loop).
    delivery = Automation.objects.get(name="Red hot accounts").deliveries.get()
    delivery_attempt(delivery_id=delivery.id)
    with signed_in_page(live_server) as page:
        page.goto(f"{base}/automations/")
        expect(page.locator("#automations")).to_contain_text("Red hot accounts")
        page.screenshot(path=str(SHOTS / "automations.png"), full_page=True)
        page.get_by_role("link", name="Red hot accounts").click()
        expect(page.locator("#deliveries")).to_contain_text("delivered")
        expect(page.locator("#new-secret")).to_have_count(0)
        page.screenshot(path=str(SHOTS / "automation.png"), full_page=True)
    assert len(receiver.requests) == 1


def test_the_pages_say_the_cooldown_in_hours_and_show_the_json_sent(
    live_server,
    scored,  # noqa: F811
    vera_manages,
    receiver,
):
    from playwright.sync_api import expect

    from automations.services import automation_create, automation_test_send

    workspace = scored.initech.product.workspaces.get()
    first = automation_create(
        workspace=workspace, trigger="new_account", url=receiver.url, cooldown_seconds=1800
    )
    second = automation_create(workspace=workspace, trigger="new_account", url=receiver.url)
    delivery = automation_test_send(automation=first)
    delivery_attempt(delivery_id=delivery.id)
    base = f"{live_server.url}/w/{workspace.id}/automations"
    with signed_in_page(live_server) as page:
        page.goto(f"{base}/")
        table = page.locator("#automations")
        expect(table).to_contain_text("30 minutes")
        expect(table).to_contain_text("24 hours")
        expect(table).to_contain_text(second.name)  # "New account → 127.0.0.1 (2)"
        page.screenshot(path=str(SHOTS / "automations-units.png"), full_page=True)
        page.goto(f"{base}/{first.id}/")
        expect(page.locator("#cooldown")).to_have_text("30 minutes per subject")
        page.goto(f"{base}/{first.id}/deliveries/{delivery.id}/")
        expect(page.locator("#body")).to_contain_text('"type": "automation.test"')
        page.screenshot(path=str(SHOTS / "automation-delivery.png"), full_page=True)
    assert second.name == f"{first.name} (2)"
