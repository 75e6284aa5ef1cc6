"""The one HTTP client: URLs, auth, paging, typed errors, a deadline, never a sleep."""

import socket
import threading
import time

import pytest
import requests
from responses import matchers

from marketplace.client import (
    BadNumber,
    MarketplaceBadAnswer,
    MarketplaceClient,
    MarketplaceForbidden,
    MarketplaceNotFound,
    MarketplaceRateLimited,
    MarketplaceRequestError,
    MarketplaceUnauthorized,
    MarketplaceUnavailable,
)
from tests.marketplace.conftest import API, BASE, DEVELOPER_ID, EMAIL, LICENSES_URL, TOKEN


def client(**kwargs) -> MarketplaceClient:
    return MarketplaceClient(email=EMAIL, api_token=TOKEN, **kwargs)


def test_vendor_lookup_sends_basic_auth_and_accept_json(mocked):
    mocked.get(
        f"{API}/developer-space/vendor/1212",
        json={"developerId": DEVELOPER_ID},
        match=[matchers.header_matcher({"Accept": "application/json"})],
    )
    assert client().developer_id("1212") == DEVELOPER_ID
    sent = mocked.calls[0].request.headers["Authorization"]
    assert sent == requests.auth._basic_auth_str(EMAIL, TOKEN)


def test_app_listing_follows_next_cursors_past_fifty_apps(mocked):
    listing = f"{API}/product-listing/developer-space/{DEVELOPER_ID}"
    first = [{"productId": f"p{n}", "appKey": f"k{n}", "appName": f"App {n}"} for n in range(50)]
    mocked.get(
        listing,
        match=[matchers.query_param_matcher({"limit": "50"})],
        json={
            "links": {
                "next": f"/rest/3/product-listing/developer-space/{DEVELOPER_ID}"
                "?limit=50&cursor=abc"
            },
            "items": first,
        },
    )
    mocked.get(
        listing,
        match=[matchers.query_param_matcher({"limit": "50", "cursor": "abc"})],
        json={"links": {"next": None}, "items": [{"productId": "p50", "appKey": "k50"}]},
    )
    apps = list(client().apps(DEVELOPER_ID))
    assert len(apps) == 51
    assert apps[-1].product_id == "p50"


@pytest.mark.parametrize(
    "href",
    [
        "/rest/3/reporting/developer-space/D/licenses?offset=50",
        "/reporting/developer-space/D/licenses?offset=50",  # without /rest/3
        "/marketplace/rest/3/reporting/developer-space/D/licenses?offset=50",
        "https://elsewhere.example/marketplace/rest/3/reporting/developer-space/D/licenses?offset=50",
    ],
)
def test_next_links_resolve_against_the_configured_base_only(href):
    expected = f"{BASE}/marketplace/rest/3/reporting/developer-space/D/licenses?offset=50"
    assert client().url(href) == expected


def test_first_license_url_asks_for_fifty_with_data_insights():
    url = client().licenses_url(
        developer_id=DEVELOPER_ID, product_id="P", last_updated="2026-05-01"
    )
    assert url.startswith(LICENSES_URL + "?")
    for part in (
        "productId=P",
        "withDataInsights=true",
        "limit=50",
        "offset=0",
        "lastUpdated=2026-05-01",
    ):
        assert part in url


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, MarketplaceRequestError),
        (401, MarketplaceUnauthorized),
        (403, MarketplaceForbidden),
        (404, MarketplaceNotFound),
    ],
)
def test_permanent_errors_are_typed_and_not_retried(mocked, status, error):
    mocked.get(LICENSES_URL, status=status, json={})
    with pytest.raises(error) as caught:
        client().licenses_page(LICENSES_URL)
    assert len(mocked.calls) == 1
    assert TOKEN not in caught.value.message


def test_401_message_says_to_replace_the_token(mocked):
    mocked.get(LICENSES_URL, status=401)
    with pytest.raises(MarketplaceUnauthorized, match="save all four connection values again"):
        client().licenses_page(LICENSES_URL)


def test_429_is_raised_at_once_with_retry_after_and_never_slept_on(mocked, slept):
    mocked.get(LICENSES_URL, status=429, headers={"Retry-After": "120"})
    with pytest.raises(MarketplaceRateLimited) as caught:
        client().licenses_page(LICENSES_URL)
    assert caught.value.retry_after == 120 and caught.value.transient
    assert len(mocked.calls) == 1 and slept == []


@pytest.mark.parametrize("header", ["Wed, 21 Oct 2026 07:28:00 GMT", "1e999", "NaN", ""])
def test_a_retry_after_that_is_not_seconds_is_ignored(mocked, header):
    mocked.get(LICENSES_URL, status=503, headers={"Retry-After": header})
    with pytest.raises(MarketplaceUnavailable) as caught:
        client().licenses_page(LICENSES_URL)
    assert caught.value.retry_after is None and caught.value.status_code == 503


def test_timeouts_and_connection_errors_are_transient(mocked):
    mocked.get(LICENSES_URL, body=requests.ConnectTimeout("slow"))
    with pytest.raises(MarketplaceUnavailable, match="timed out") as caught:
        client().licenses_page(LICENSES_URL)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    mocked.replace("GET", LICENSES_URL, body=requests.ConnectionError("refused"))
    with pytest.raises(MarketplaceUnavailable, match="could not connect"):
        client().licenses_page(LICENSES_URL)


def test_a_body_that_is_not_json_is_transient(mocked):
    mocked.get(LICENSES_URL, body="<html>gateway</html>")
    with pytest.raises(MarketplaceUnavailable, match="non-JSON"):
        client().licenses_page(LICENSES_URL)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"_links": "next", "licenses": []}, "`_links` as str"),
        ({"_links": {"next": 5}, "licenses": []}, "not a link"),
        ({"_links": {}, "licenses": {"a": 1}}, "no `licenses` list"),
        ([1, 2], "not a JSON object"),
    ],
)
def test_a_license_page_of_the_wrong_shape_is_a_permanent_bad_answer(mocked, body, says):
    mocked.get(LICENSES_URL, json=body)
    with pytest.raises(MarketplaceBadAnswer, match=says) as caught:
        client().licenses_page(LICENSES_URL)
    assert not caught.value.transient


def test_an_app_listing_of_the_wrong_shape_is_a_bad_answer(mocked):
    mocked.get(
        f"{API}/product-listing/developer-space/{DEVELOPER_ID}",
        json={"links": "x", "items": []},
    )
    with pytest.raises(MarketplaceBadAnswer, match="app listing"):
        list(client().apps(DEVELOPER_ID))


def test_numbers_no_column_can_hold_are_read_as_markers_not_errors(mocked):
    body = '{"licenses": [{"a": NaN, "b": 1e999, "c": -Infinity, "d": ' + "9" * 5000 + ', "e": 7}]}'
    mocked.get(LICENSES_URL, body=body, content_type="application/json")
    (record,) = client().licenses_page(LICENSES_URL).licenses
    assert all(isinstance(record[k], BadNumber) for k in "abcd") and record["e"] == 7


@pytest.fixture
def dripping_server():
    """Answers 200 with headers at once, then one byte of body every 0.2 s, for ever."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve():
        connection, _ = listener.accept()
        connection.recv(65536)
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"
        )
        while not stop.wait(0.2):
            try:
                connection.sendall(b" ")
            except OSError:
                break
        connection.close()

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()


def test_every_request_ends_by_its_deadline_however_slowly_the_answer_drips(dripping_server):
    slow = MarketplaceClient(
        email=EMAIL, api_token=TOKEN, base_url=dripping_server, deadline=1.0, read_timeout=5.0
    )
    started = time.monotonic()
    with pytest.raises(MarketplaceUnavailable, match="took longer than 1 s"):
        slow.get_json(f"{dripping_server}/marketplace/rest/3/x")
    assert time.monotonic() - started < 2.5  # the deadline, not the read timeout, ended it


def test_next_link_as_object_or_string(mocked):
    mocked.get(
        LICENSES_URL, json={"_links": {"next": {"href": "/rest/3/x?offset=50"}}, "licenses": []}
    )
    assert client().licenses_page(LICENSES_URL).next_url == f"{API}/x?offset=50"


def test_client_repr_hides_the_token():
    assert TOKEN not in repr(client())
