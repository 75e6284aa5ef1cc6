"""The users list and a segment's page in a real browser (Debian's chromium through Playwright):
names as displayed, conditions in words, columns that never break a word, the favicon. The
screenshots land in EDS_TEST_SCREENSHOTS (default /tmp), to look at."""

from engagement.segments import segment_refresh
from tests.dashboard.test_browser import SHOTS, pytestmark, signed_in_page, workspace_url
from tests.engagement.helpers import apply, identify

__all__ = ["pytestmark"]  # chromium's presence, as the other browser tests


def _breaks_no_word(page, selector: str) -> bool:
    return page.evaluate(
        """(selector) => [...document.querySelectorAll(selector)].every((cell) => {
            const style = getComputedStyle(cell);
            return style.wordBreak === "normal" && style.overflowWrap === "normal";
        })""",
        selector,
    )


def test_the_users_list_in_the_browser(live_server, scored, vera):
    from playwright.sync_api import expect

    base = workspace_url(live_server, scored)
    with signed_in_page(live_server) as page:
        page.get_by_role("link", name="Users", exact=True).click()
        expect(page.get_by_role("heading", name="Users")).to_be_visible()
        rows = page.locator("#users tbody tr")
        expect(rows).to_have_count(3)
        expect(rows.first).to_contain_text("Ann Lee")
        expect(rows.first).to_contain_text("ann@initech.example · ann")
        assert _breaks_no_word(page, "#users td, #users th")
        page.screenshot(path=str(SHOTS / "users-list.png"), full_page=True)

        page.get_by_role("link", name="Name").click()  # by name, A to Z first
        expect(rows.first).to_contain_text("Ann Lee")
        expect(rows.last).to_contain_text("cy@hooli.example")
        page.get_by_role("link", name="Name").click()  # again: Z to A
        expect(rows.first).to_contain_text("cy@hooli.example")
        page.get_by_label("Search").fill("lee")
        page.get_by_label("Search").press("Enter")
        expect(rows).to_have_count(1)
        expect(page.locator("main")).to_contain_text("1 user, page 1 of 1.")

        page.get_by_role("link", name="Ann Lee").click()
        expect(page.get_by_role("heading", name="Ann Lee")).to_be_visible()
        assert page.url.startswith(f"{base}/users/{scored.ann.id}/")

        icon = page.goto(f"{live_server.url}/favicon.ico")
        assert icon is not None and icon.ok
        assert icon.headers["content-type"].startswith("image/svg+xml")


def test_a_segment_page_in_the_browser(live_server, scored, vera):
    from playwright.sync_api import expect

    segment = scored.enterprise
    segment.conditions = [
        {"field": "trait:plan", "operator": "equals", "value": "enterprise"},
        {"field": "metric:engagement_score", "operator": "greater_than", "value": 74},
        {
            "field": "event:Report_Created",
            "operator": "count_at_least",
            "value": 3,
            "within_last_days": 7,
        },
    ]
    segment.save()
    segment_refresh(segment=segment)
    base = workspace_url(live_server, scored)
    with signed_in_page(live_server) as page:
        page.goto(f"{base}/segments/{segment.id}/")
        expect(page.get_by_role("heading", name="Enterprise")).to_be_visible()
        conditions = page.locator("ul.conditions li")
        expect(conditions).to_have_text(
            [
                "plan equals enterprise",
                "score greater than 74",
                "Report_Created at least 3 times in the last 7 days",
            ]
        )
        member = page.locator("#members tbody tr").first
        expect(member).to_contain_text("Initech")
        expect(member).to_contain_text("initech")
        assert _breaks_no_word(page, "#members td")
        icon = page.locator('link[rel="icon"]')
        expect(icon).to_have_attribute("href", "/static/dashboard/favicon.svg")
        page.screenshot(path=str(SHOTS / "segment-page.png"), full_page=True)


def test_a_long_id_ends_in_an_ellipsis_in_a_narrow_window(live_server, acme, scored, vera):
    from playwright.sync_api import expect

    long_id = "tenant-" + "x" * 90
    apply(acme, identify(long_id, {"name": "Long"}))
    base = workspace_url(live_server, scored)
    with signed_in_page(live_server) as page:
        page.set_viewport_size({"width": 700, "height": 900})
        page.goto(f"{base}/users/?sort=name&order=asc")
        cell = page.locator("#users tbody tr", has_text="Long").locator(".clip")
        expect(cell).to_have_attribute("title", long_id)
        clipped = cell.evaluate("(e) => e.scrollWidth > e.clientWidth")
        assert clipped  # cut with an ellipsis, not broken over lines
        assert cell.evaluate("(e) => getComputedStyle(e).textOverflow") == "ellipsis"
        page.screenshot(path=str(SHOTS / "users-list-narrow.png"), full_page=True)
