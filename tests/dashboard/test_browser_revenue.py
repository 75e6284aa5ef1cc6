"""Money on the dashboard in a real browser (Debian's chromium through Playwright): the overview's
MRR tiles and band table, the accounts list's MRR and renewal columns sorted by a click. The
screenshots land in EDS_TEST_SCREENSHOTS (default /tmp), to look at."""

from datetime import UTC, datetime, timedelta

from django.core.cache import cache

from engagement.segments import segments_refresh
from tests.dashboard.test_browser import SHOTS, pytestmark, signed_in_page, workspace_url

__all__ = ["pytestmark"]  # chromium's presence, as the other browser tests


def _licensed(account, mrr, renews_in: int) -> None:
    renewal = (datetime.now(UTC) + timedelta(days=renews_in)).date().isoformat()
    account.traits = {
        **account.traits,
        "am.status": "active",
        "am.licenseType": "COMMERCIAL",
        "am.mrr": mrr,
        "am.maintenanceEndDate": renewal,
    }
    account.save(update_fields=["traits"])


def test_money_on_the_overview_and_the_accounts_list(live_server, scored, vera):
    from playwright.sync_api import expect

    # Initech (busy) pays $3,352.94 a month; Umbrella (quiet) $1,249.50, renewing in 12 days.
    _licensed(scored.initech, 3352.94, 200)
    _licensed(scored.umbrella, 1249.5, 12)
    workspace = scored.initech.product.workspaces.get()
    segments_refresh(workspace_id=workspace.id)
    cache.clear()
    base = workspace_url(live_server, scored)
    with signed_in_page(live_server) as page:
        page.goto(f"{base}/")
        expect(page.locator("#mrr-total")).to_contain_text("$4,602 MRR (USD) of 2 accounts")
        expect(page.locator("#mrr-at-risk")).to_contain_text(
            "$1,250 MRR renewing at risk in the next 60 days: 1 account"
        )
        expect(page.locator("#mrr-by-band tbody tr")).to_have_count(4)
        page.screenshot(path=str(SHOTS / "overview-revenue.png"), full_page=True)

        page.locator("#mrr-at-risk a").click()
        rows = page.locator("#accounts tbody tr")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("Umbrella Corp")

        page.goto(f"{base}/accounts/")
        page.get_by_role("link", name="MRR").click()
        expect(rows).to_have_count(3)
        expect(page.locator("#accounts td.mrr")).to_have_text(["$3,352.94", "$1,249.50", "–"])
        page.screenshot(path=str(SHOTS / "accounts-mrr.png"), full_page=True)
        page.get_by_role("link", name="Renewal").click()
        expect(rows.first).to_contain_text("Umbrella Corp")
        expect(rows.last).to_contain_text("Hooli")
