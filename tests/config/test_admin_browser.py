"""The admin in a real browser at 1,280 px (Debian's chromium driven by Playwright): every
change list and the marketplace connection's pages fit the window, nothing cut off or scrolled
sideways."""

import os
from pathlib import Path

import pytest
from django.contrib import admin
from django.urls import reverse

from tests.config.test_admin_pages import (  # noqa: F401 (fixtures)
    AXES_INSTALLED,
    marketplace_answers,
    objects,
)

CHROMIUM = "/usr/bin/chromium"
# Where these tests leave their screenshots, to look at (never the README's docs/images).
SHOTS = Path(os.environ.get("EDS_TEST_SCREENSHOTS") or "/tmp")

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists() and not os.environ.get("CI"),
    reason="needs Debian's chromium at /usr/bin/chromium (CI installs it)",
)

# How far the page, or a list's own scrolling box, reaches past what the window shows.
OVERFLOW = """() => {
  const page = document.documentElement;
  const boxes = [...document.querySelectorAll('.results, .tabular, fieldset')];
  return {
    page: page.scrollWidth - page.clientWidth,
    boxes: boxes.map(b => b.scrollWidth - b.clientWidth).filter(x => x > 1),
  };
}"""


def long_values(found: dict) -> None:
    """Values as long as their columns hold, unbroken by spaces, in the lists that show them."""
    from django.utils import timezone

    from ingestion.models import DroppedRequest
    from marketplace.models import SyncRun

    acme = found["acme"]
    DroppedRequest.objects.create(
        product=acme.product,
        endpoint="v2/track",
        reason=DroppedRequest.Reason.choices[0][0],
        received_at=timezone.now(),
        detail="properties." + "x" * 300 + " is not valid" * 10,
    )
    SyncRun.objects.filter(connection=found["connection"]).update(
        error="HTTP 500 from https://api.atlassian.com/" + "y" * 300, note="n" * 255
    )
    if AXES_INSTALLED:
        from axes.models import AccessAttempt

        AccessAttempt.objects.create(
            username="u" * 150,
            ip_address="10.0.0.1",
            user_agent="Mozilla/5.0" + "z" * 244,
            http_accept="text/html",
            path_info="/admin/login/",
            get_data="",
            post_data="",
            failures_since_start=1,
        )


def admin_pages(found: dict) -> list[tuple[str, str]]:
    pages = [
        (
            f"{model._meta.app_label}-{model._meta.model_name}",
            reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist"),
        )
        for model in admin.site._registry
    ]
    connection = found["connection"]
    pages += [
        ("connection-add", reverse("admin:marketplace_marketplaceconnection_add")),
        (
            "connection-change",
            reverse("admin:marketplace_marketplaceconnection_change", args=[connection.pk]),
        ),
    ]
    return sorted(pages)


def test_every_change_list_and_the_connection_pages_fit_1280_px(live_server, request):
    from playwright.sync_api import sync_playwright

    request.getfixturevalue("marketplace_answers")
    found = request.getfixturevalue("objects")
    long_values(found)
    pages = admin_pages(found)  # read before playwright's event loop runs
    too_wide = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{live_server.url}/admin/login/")
            page.fill("#id_username", found["admin"].username)
            page.fill("#id_password", "password")
            page.click("input[type=submit]")
            page.wait_for_url(f"{live_server.url}/admin/")
            for name, path in pages:
                page.goto(f"{live_server.url}{path}")
                page.screenshot(path=str(SHOTS / f"admin-{name}.png"), full_page=True)
                overflow = page.evaluate(OVERFLOW)
                if overflow["page"] > 1 or overflow["boxes"]:
                    too_wide[name] = overflow
        finally:
            browser.close()

    assert not too_wide, "\n".join(f"{k}: {v}" for k, v in sorted(too_wide.items()))


def test_the_demo_login_works_its_products_admin_pages_in_a_browser(
    live_server, acme, globex, settings, tmp_path
):
    """The README's first hour: sign in to /admin/ as the printed demo login, open the product's
    keys and tokens, and add a key; Globex's rows never show."""
    from playwright.sync_api import expect, sync_playwright

    from config.demo_login import demo_login_ensure

    settings.DATA_DIR = tmp_path
    login = demo_login_ensure(product=acme.product)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{live_server.url}/admin/login/?next=/admin/")
            page.get_by_label("Username").fill(login.username)
            page.get_by_label("Password").fill(login.password)
            page.get_by_role("button", name="Log in").click()
            expect(page.get_by_role("link", name="Ingestion keys")).to_be_visible()
            page.screenshot(path=str(SHOTS / "admin-demo-index.png"), full_page=True)
            page.get_by_role("link", name="Ingestion keys").first.click()
            expect(page.locator("#result_list")).to_contain_text("Acme key")
            page.get_by_role("link", name="Add ingestion key").click()
            page.get_by_label("Product").select_option(label="Acme")
            page.get_by_label("Label").fill("rotation")
            page.get_by_role("button", name="Save", exact=True).click()
            expect(page.locator("#result_list")).to_contain_text("rotation")
            assert "Globex" not in page.content()
            page.screenshot(path=str(SHOTS / "admin-demo-keys.png"), full_page=True)
            page.goto(f"{live_server.url}/admin/readapi/apitoken/")
            expect(page.locator("#result_list")).to_contain_text("Acme token")
            assert "Globex" not in page.content()
        finally:
            browser.close()
