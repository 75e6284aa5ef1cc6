"""In a real browser (issue 71 §2-3): an account scoring 0 shows "–" for its percentile, and a
new account's daily-score chart draws nothing before the day it was first seen."""

import pytest

from engagement.history import score_history_update
from engagement.models import Account
from engagement.scoring import workspace_rescore
from tests.dashboard.test_browser import (
    CHART_DRAWN_MS,
    SHOTS,
    pytestmark,
    signed_in_page,
    workspace_url,
)
from tests.engagement.helpers import apply, group, track

assert pytestmark  # the same skip as test_browser: Debian's chromium must be there


@pytest.fixture
def dunder(acme, scored) -> Account:
    """Dunder and its user Dee, first seen two days ago, among the scored accounts."""
    apply(
        acme,
        group("dee", "dunder", {"name": "Dunder"}, days_ago=2),
        track("dee", "Login", days_ago=2, account="dunder"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    score_history_update(workspace_id=acme.workspace.id)
    return Account.objects.get(product=acme.product, tracking_id="dunder")


@pytestmark
def test_no_rank_for_0_and_no_line_before_first_seen(live_server, scored, vera, dunder):
    from playwright.sync_api import expect

    base = workspace_url(live_server, scored)  # read before playwright's event loop runs
    with signed_in_page(live_server) as page:
        page.goto(f"{base}/accounts/{scored.hooli.id}/")
        expect(page.locator("#percentile-rank")).to_have_text("–")
        page.screenshot(path=str(SHOTS / "rank-of-0.png"), full_page=True)

        page.goto(f"{base}/accounts/{dunder.id}/")
        expect(page.locator("#score-chart svg.main-svg").first).to_be_visible(
            timeout=CHART_DRAWN_MS
        )
        expect(page.locator("#percentile-rank")).not_to_have_text("–")
        drawn = page.evaluate("document.getElementById('score-chart').data[0].y")
        assert drawn[:27] == [None] * 27 and all(score > 0 for score in drawn[27:]), drawn
        # Three points drawn (two days ago, yesterday, today), none on the days before.
        expect(page.locator("#score-chart .scatterlayer .point")).to_have_count(3)
        expect(page.locator("#score-yesterday")).to_have_text(str(drawn[-2]))
        page.screenshot(path=str(SHOTS / "chart-first-seen.png"), full_page=True)
