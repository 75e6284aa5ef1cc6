"""Browser clients against the running service, from a page on another origin, in Debian's
chromium driven by Playwright: Segment's analytics-next (fetched with `npm pack`, pointed at the
service with the documented snippet) and the service's own /tracker.js (offline spells, calls
made just before leaving the page). Checked as a user would: the user, its traits, the account
link and score, no failed request in the browser, and nothing kept that the service promises
not to keep."""

import json
import os
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.ingestion.browser_support import analytics_next_umd, page_server, service
from tests.processes import wait_for

CHROMIUM = "/usr/bin/chromium"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not Path(CHROMIUM).exists() and not os.environ.get("CI"),
        reason="needs Debian's chromium at /usr/bin/chromium (CI installs it)",
    ),
]

ANALYTICS_PAGE = """<!doctype html><meta charset="utf-8"><title>analytics-next</title>
<link rel="icon" href="data:,">
<script src="/umd/index.js"></script>
<script>
const analytics = AnalyticsNext.AnalyticsBrowser.load({
  writeKey: %(key)s,
  cdnSettings: {integrations: {
    "Segment.io": {apiKey: %(key)s, apiHost: %(host)s, protocol: "http"}}},
});
window.done = (async () => {
  await analytics.page("Home");
  await analytics.identify("ann", {email: "ann@acme.test", name: "Ann", plan: "pro"});
  await analytics.group("acme-co", {name: "Acme Co", seats: 12});
  await analytics.track("Report Created", {secret: "never-kept"});
  await analytics.track("Report Created");
  await analytics.page("Home");
  return "sent";
})();
</script>"""

TRACKER_PAGE = """<!doctype html><meta charset="utf-8"><title>tracker</title>
<link rel="icon" href="data:,">
<script src="%(service)s/tracker.js"></script>
<script>accoil.load(%(key)s);</script>
<a id="leave" href="/next.html">leave</a>"""


def user(running, tracking_id: str) -> dict:
    found = running.read(
        f"/v2/users?workspace_id={running.workspace_id}&match_type=tracking_id"
        f"&match_value={tracking_id}&expand=traits"
    )
    return found["data"][0] if found.get("data") else {}


def account(running, tracking_id: str) -> dict:
    found = running.read(
        f"/v1/accounts?workspace_id={running.workspace_id}&match_type=tracking_id"
        f"&match_value={tracking_id}&expand=traits"
    )
    return found["data"][0] if found.get("data") else {}


def breakdown(record: dict) -> dict[str, int]:
    return {line["event"]: line["count"] for line in record.get("score_breakdown") or []}


def breakdown_and_scored(record: dict) -> tuple[dict[str, int], bool]:
    return breakdown(record), record["engagement_score"] > 0


def eventually(read, expected, timeout: float = 120.0, running=None):
    """Wait until `read()` returns `expected` (the worker applies, a refresh scores); the last
    value read is in the failure, with what the `running` service's database holds."""
    seen: list = [None]

    def check() -> bool:
        seen[0] = read()
        return seen[0] == expected

    try:
        wait_for(check, timeout=timeout)
    except AssertionError as late:
        held = running.diagnosis() if running is not None else ""
        raise AssertionError(
            f"after {timeout} s still {seen[0]!r}, not {expected!r}\n{held}"
        ) from late


@pytest.fixture(params=["embedded", "production"])
def running(request, tmp_path):
    with service(request.param, tmp_path, settings.CELERY_BROKER_URL) as started:
        yield started


def browse(page_url: str, steps) -> tuple[list[str], list[str]]:
    """Open `page_url` in chromium, run `steps(page, context)`; the requests that failed and
    the console errors."""
    from playwright.sync_api import sync_playwright

    failed: list[str] = []
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context()
            page = context.new_page()
            page.on("requestfailed", lambda r: failed.append(f"{r.url} {r.failure}"))
            page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.url} {r.status}"))
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.goto(page_url)
            steps(page, context)
        finally:
            browser.close()
    return failed, errors


def test_analytics_next_unchanged(running, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "umd").symlink_to(analytics_next_umd(), target_is_directory=True)
    (site / "index.html").write_text(
        ANALYTICS_PAGE
        % {"key": json.dumps(running.key), "host": json.dumps(running.url[7:] + "/v1")}
    )

    with page_server(site) as origin:
        failed, errors = browse(
            f"{origin}/index.html",
            lambda page, context: (
                page.wait_for_function("window.done", timeout=20_000)
                or page.evaluate("window.done")
            ),
        )

    assert failed == [] and errors == []
    eventually(
        lambda: user(running, "ann").get("traits"),
        {"email": "ann@acme.test", "name": "Ann", "plan": "pro"},
    )
    ann = user(running, "ann")
    # The first page() came before identify(): anonymous, counted, not applied.
    expected = {"Report Created": 2, "Viewed Home Page": 1}
    # The account's events and its score (the mean of its users'): a refresh that ran while the
    # worker applied the page's calls may have seen the account's events but scored Ann before
    # them; the next refresh scores both, so wait for both.
    eventually(
        lambda: breakdown_and_scored(account(running, "acme-co")), (expected, True), running=running
    )
    acme_co = account(running, "acme-co")
    assert acme_co["traits"] == {"name": "Acme Co", "seats": 12}
    assert acme_co["total_users"] == 1
    assert "never-kept" not in json.dumps(acme_co) + json.dumps(ann)
    # Nothing the service promises not to keep: properties, the page's URL, the user agent.
    stored = running.stored()
    assert "ann@acme.test" in stored  # the dump does hold what is kept
    for kept_out in ("never-kept", f"{origin}/index.html", "HeadlessChrome", "Mozilla/5.0"):
        assert kept_out not in stored, kept_out


def test_the_tracker_survives_an_offline_spell_and_a_quick_exit(running, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(
        TRACKER_PAGE % {"service": running.url, "key": json.dumps(running.key)}
    )
    (site / "next.html").write_text(
        '<!doctype html><title>next</title><link rel="icon" href="data:,"><p>next page</p>'
    )

    def steps(page, context):
        page.wait_for_function("window.accoil && accoil.VERSION")
        page.evaluate("accoil.identify('bob', {email: 'bob@acme.test'})")
        page.evaluate("accoil.group('globex', {name: 'Globex'})")
        page.wait_for_function("!localStorage.getItem('eds_tracker_queue').includes('bob@')")
        context.set_offline(True)
        page.evaluate("accoil.track('Exported')")
        time.sleep(1.5)  # the tracker tries, fails, keeps the call queued
        assert "Exported" in page.evaluate("localStorage.getItem('eds_tracker_queue')")
        context.set_offline(False)
        page.wait_for_function("!localStorage.getItem('eds_tracker_queue').includes('Exported')")
        page.evaluate("accoil.track('Left At Once')")
        page.click("#leave")  # at once: the pagehide beacon carries the call
        page.wait_for_url("**/next.html")

    with page_server(site) as origin:
        failed, errors = browse(f"{origin}/index.html", steps)

    # Expected: the offline spell's failed fetch, and a keepalive send in flight as the page is
    # left, which the page sees aborted though the browser completes it (what arrived is read
    # back below).
    expected = ("ERR_INTERNET_DISCONNECTED", "ERR_ABORTED")
    assert [f for f in failed if not any(e in f for e in expected)] == [] and errors == []
    eventually(lambda: user(running, "bob").get("traits"), {"email": "bob@acme.test"})
    expected = {"Exported": 1, "Left At Once": 1}
    eventually(lambda: breakdown(account(running, "globex")), expected, running=running)
