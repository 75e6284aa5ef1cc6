"""The dashboard in a real browser (Debian's chromium driven by Playwright): sign in, find an
account by search, open it, see its score, chart and breakdown, and no request leaves the
service."""

import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.dashboard.conftest import PASSWORD

CHROMIUM = "/usr/bin/chromium"

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists() and not os.environ.get("CI"),
    reason="needs Debian's chromium at /usr/bin/chromium (CI installs it)",
)


def test_sign_in_search_open_an_account_and_stay_on_the_service(
    live_server, scored, vera, tmp_path
):
    from playwright.sync_api import expect, sync_playwright

    served = urlsplit(live_server.url).netloc
    requested: list[str] = []
    elsewhere: list[str] = []

    def guard(route):
        url = route.request.url
        requested.append(url)
        if urlsplit(url).netloc != served:
            elsewhere.append(url)
            route.abort()
        else:
            route.continue_()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.route("**/*", guard)

            page.goto(f"{live_server.url}/")
            expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
            page.get_by_label("Username").fill("vera")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_role("heading", name="Acme")).to_be_visible()

            page.get_by_role("link", name="Accounts", exact=True).click()
            page.get_by_label("Search").fill("initech")
            page.get_by_label("Search").press("Enter")
            rows = page.locator("#accounts tbody tr")
            expect(rows).to_have_count(1)
            page.screenshot(path=str(tmp_path / "accounts.png"), full_page=True)

            page.get_by_role("link", name="Initech").click()
            expect(page.get_by_role("heading", name="Initech")).to_be_visible()
            expect(page.locator("#score")).to_have_text("100")
            # plotly.js drew the score chart (an SVG inside the figure).
            expect(page.locator("#score-chart svg.main-svg").first).to_be_visible()
            breakdown = page.locator("#breakdown")
            expect(breakdown).to_contain_text("Report_Created")
            expect(breakdown).to_contain_text("Dashboard_Viewed")
            page.screenshot(path=str(tmp_path / "account.png"), full_page=True)
        finally:
            browser.close()

    keep = os.environ.get("DASHBOARD_SCREENSHOTS")
    if keep:
        for name in ("accounts.png", "account.png"):
            shutil.copy(tmp_path / name, Path(keep) / name)
    assert requested, "the guard saw no request"
    assert elsewhere == []
    assert any("/static/dashboard/vendor/plotly.min.js" in url for url in requested)
