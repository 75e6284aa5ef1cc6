"""The account page in a real browser says how the account's score is formed: the mean of its
users' scores, with the breakdown labelled as the account's events; an account with events and
no users says why it has no score. Screenshots go to EDS_TEST_SCREENSHOTS (default /tmp)."""

import os
from pathlib import Path

import pytest

from engagement.models import Account, Membership
from engagement.scoring import workspace_rescore
from tests.dashboard.test_browser import CHROMIUM, SHOTS, signed_in_page
from tests.engagement.helpers import apply, identify, track

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists() and not os.environ.get("CI"),
    reason="needs Debian's chromium at /usr/bin/chromium (CI installs it)",
)


def test_the_account_page_says_its_score_is_its_users_mean_or_why_it_has_none(
    live_server, acme, vera
):
    from playwright.sync_api import expect

    apply(
        acme,
        identify("ann", {"name": "Ann Lee"}),
        # Ann is linked to Initech by her tracks alone (context.groupId), no group call.
        track("ann", "Report_Created", times=4, account="initech"),
        track("bob", "Export", times=2, account="legacy"),
    )
    # Legacy's events stay, its only user unlinked (data stored before tracks linked users).
    Membership.objects.filter(account__tracking_id="legacy").delete()
    workspace_rescore(workspace_id=acme.workspace.id)
    accounts = dict(Account.objects.filter(product=acme.product).values_list("tracking_id", "id"))
    base = f"{live_server.url}/w/{acme.workspace.id}/accounts"

    with signed_in_page(live_server) as page:
        page.goto(f"{base}/{accounts['initech']}/")
        expect(page.locator("#score")).to_have_text("100")
        expect(page.locator("#score-basis")).to_have_text(
            "Its score is the mean of its 1 user's score."
        )
        expect(page.locator("#breakdown-heading")).to_have_text("The account's events")
        expect(page.locator("#breakdown")).to_contain_text("Report_Created")
        expect(page.locator("#users")).to_contain_text("Ann Lee")
        page.screenshot(path=str(SHOTS / "account-score-basis.png"), full_page=True)

        page.goto(f"{base}/{accounts['legacy']}/")
        expect(page.locator("#score")).to_have_text("–")  # no users, no score: not a bare 0
        expect(page.locator("#score-chart-empty")).to_have_text(
            "No score in the last 30 days: no users are linked to it."
        )
        expect(page.locator("#score-basis")).to_have_text(
            "No users are linked to this account, so it has no score: "
            "its score is the mean of its users' scores."
        )
        expect(page.locator("#breakdown")).to_contain_text("Export")
        page.screenshot(path=str(SHOTS / "account-no-users.png"), full_page=True)
