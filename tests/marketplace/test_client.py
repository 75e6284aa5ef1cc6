"""The one HTTP client: URLs, auth, paging, typed errors, retries honouring Retry-After."""

import pytest
import requests
from responses import matchers

from marketplace.client import (
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


def test_429_is_retried_honouring_retry_after_then_succeeds(mocked, slept):
    mocked.get(LICENSES_URL, status=429, headers={"Retry-After": "7"})
    mocked.get(LICENSES_URL, status=503)
    mocked.get(LICENSES_URL, json={"licenses": [{"cloudId": "c1"}], "totalCount": 1})
    page = client().licenses_page(LICENSES_URL)
    assert page.licenses == [{"cloudId": "c1"}]
    assert page.next_url is None and page.total == 1
    assert slept == [7.0, 2.0]  # Retry-After, then exponential backoff (1 s * 2^1)


def test_transient_errors_give_up_after_bounded_retries(mocked, slept):
    mocked.get(LICENSES_URL, status=502)
    with pytest.raises(MarketplaceUnavailable) as caught:
        client(retries=3).licenses_page(LICENSES_URL)
    assert caught.value.status_code == 502
    assert len(mocked.calls) == 4
    assert slept == [1.0, 2.0, 4.0]


def test_retry_after_is_capped(mocked, slept):
    mocked.get(LICENSES_URL, status=429, headers={"Retry-After": "86400"})
    with pytest.raises(MarketplaceRateLimited) as caught:
        client(retries=1).licenses_page(LICENSES_URL)
    assert caught.value.retry_after == 86400
    assert slept == [30.0]


def test_timeouts_and_connection_errors_are_transient(mocked, slept):
    mocked.get(LICENSES_URL, body=requests.ConnectTimeout("slow"))
    mocked.get(LICENSES_URL, body=requests.ConnectionError("refused"))
    with pytest.raises(MarketplaceUnavailable, match="could not connect"):
        client(retries=1).licenses_page(LICENSES_URL)
    assert len(slept) == 1


def test_a_body_that_is_not_json_is_transient(mocked, slept):
    mocked.get(LICENSES_URL, body="<html>gateway</html>")
    with pytest.raises(MarketplaceUnavailable, match="non-JSON"):
        client(retries=0).licenses_page(LICENSES_URL)


def test_next_link_as_object_or_string(mocked):
    mocked.get(
        LICENSES_URL, json={"_links": {"next": {"href": "/rest/3/x?offset=50"}}, "licenses": []}
    )
    assert client().licenses_page(LICENSES_URL).next_url == f"{API}/x?offset=50"


def test_client_repr_hides_the_token():
    assert TOKEN not in repr(client())
