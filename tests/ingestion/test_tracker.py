"""/tracker.js as a page loads it: JavaScript, versioned, cached and revalidated, small, and
free of anything that would send URLs or device data. (Its behaviour in a browser:
test_browser_clients.py.)"""

import gzip
import re

from ingestion.tracker.views import TRACKER_VERSION, tracker_source


def test_the_tracker_is_served_with_an_etag_and_an_hour_of_cache(client):
    response = client.get("/tracker.js")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/javascript; charset=utf-8"
    assert response["Cache-Control"] == "public, max-age=3600"
    assert response["ETag"]
    assert f'VERSION = "{TRACKER_VERSION}"' in response.content.decode()


def test_a_browser_holding_the_same_copy_gets_a_304(client):
    etag = client.get("/tracker.js")["ETag"]

    again = client.get("/tracker.js", HTTP_IF_NONE_MATCH=etag)

    assert (again.status_code, again.content) == (304, b"")


def test_a_pinned_version_is_cached_for_good(client):
    response = client.get(f"/tracker-{TRACKER_VERSION}.js")

    assert response.status_code == 200
    assert response["Cache-Control"] == "public, max-age=31536000, immutable"
    assert response.content == client.get("/tracker.js").content


def test_only_get_and_head(client):
    assert client.post("/tracker.js").status_code == 405


def test_it_is_under_5_kb_gzipped():
    assert len(gzip.compress(tracker_source(), 9)) < 5 * 1024


def test_it_reads_no_url_referrer_or_device_data():
    source = tracker_source().decode()
    for forbidden in ("location.href", "referrer", "userAgent", "screen.", "navigator.language"):
        assert forbidden not in source, forbidden
    # Each call carries a messageId, so a retried batch is applied once.
    assert re.search(r"message\.messageId = uuid\(\)", source)
