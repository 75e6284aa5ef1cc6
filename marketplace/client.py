"""The one HTTP client of the marketplace API: timeouts, bounded retries, typed errors.

Every request uses HTTP Basic (account email, API token) and `Accept: application/json`. Failures
become typed errors: permanent ones (401, 403, 404, other 4xx) say what to check; transient ones
(429, 5xx, timeouts, connection errors, unreadable bodies) are retried here a few times with
exponential backoff honouring `Retry-After`, then raised for the caller to retry later.
No other module of the project imports `requests`, and the token never appears in an error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

import requests
from django.conf import settings

logger = logging.getLogger(__name__)

PAGE_SIZE = 50
TIMEOUT_SECONDS = (5.0, 30.0)  # connect, read
RETRIES = 3  # in-process retries of one request before a transient error is raised
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0
MAX_APP_PAGES = 100  # bounds the cursor loop of the product listing (5,000 apps)


class MarketplaceError(Exception):
    """Base of every failure talking to the marketplace; `message` is for the admin."""

    transient = False
    status_code: int | None = None

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code


class MarketplaceUnauthorized(MarketplaceError):
    """401: the email or API token is wrong, or the token expired or was revoked."""

    status_code = 401


class MarketplaceForbidden(MarketplaceError):
    """403: the account lacks a permission (vendor, listing or license reporting)."""

    status_code = 403


class MarketplaceNotFound(MarketplaceError):
    """404: unknown vendor, developer space or product."""

    status_code = 404


class MarketplaceRequestError(MarketplaceError):
    """Another 4xx: the request itself is wrong; retrying cannot help."""


class MarketplaceRateLimited(MarketplaceError):
    """429: slow down; `retry_after` seconds when the marketplace said so."""

    transient = True
    status_code = 429

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class MarketplaceUnavailable(MarketplaceError):
    """5xx, timeout, connection error or an unreadable body: try again later."""

    transient = True

    def __init__(
        self, message: str, *, status_code: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class App:
    product_id: str
    app_key: str
    app_name: str


@dataclass(frozen=True, slots=True)
class LicensePage:
    licenses: list[dict]
    next_url: str | None
    total: int | None


def _retry_after(response: requests.Response) -> float | None:
    raw = response.headers.get("Retry-After", "").strip()
    try:
        return max(0.0, float(raw)) if raw else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def backoff_seconds(attempt: int, retry_after: float | None = None, *, cap: float) -> float:
    """Exponential backoff (base * 2^attempt), or the server's Retry-After if longer; capped."""
    delay = BACKOFF_BASE_SECONDS * (2**attempt)
    if retry_after is not None:
        delay = max(delay, retry_after)
    return min(delay, cap)


class MarketplaceClient:
    """Read-only requests for one set of credentials."""

    def __init__(
        self,
        *,
        email: str,
        api_token: str,
        base_url: str | None = None,
        retries: int = RETRIES,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.base_url = (base_url or settings.MARKETPLACE_API_URL).rstrip("/")
        self.retries = retries
        self._sleep = sleep or time.sleep
        self._session = requests.Session()
        self._session.auth = (email, api_token)
        self._session.headers["Accept"] = "application/json"

    def __repr__(self) -> str:  # never the token
        return f"<MarketplaceClient {self.base_url}>"

    # --- URLs -----------------------------------------------------------------------------
    def url(self, path: str) -> str:
        """An absolute URL for a path or link the API returned.

        Links come as `/rest/3/...` (documented), sometimes without `/rest/3`, sometimes with the
        `/marketplace` prefix or as absolute URLs; only the path and query are kept, so the
        credentials go nowhere but the configured base URL.
        """
        parts = urlsplit(path)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        if path.startswith("/marketplace/"):
            return self.base_url + path
        if path.startswith("/rest/"):
            return f"{self.base_url}/marketplace{path}"
        return f"{self.base_url}/marketplace/rest/3/{path.lstrip('/')}"

    def licenses_url(
        self, *, developer_id: str, product_id: str, last_updated: str | None = None
    ) -> str:
        query = {
            "productId": product_id,
            "withDataInsights": "true",
            "limit": PAGE_SIZE,
            "offset": 0,
        }
        if last_updated:
            query["lastUpdated"] = last_updated
        return self.url(
            f"/rest/3/reporting/developer-space/{developer_id}/licenses?{urlencode(query)}"
        )

    # --- requests -------------------------------------------------------------------------
    def get_json(self, url: str) -> dict:
        """GET with in-process retries of transient failures; raises a typed error."""
        attempt = 0
        while True:
            try:
                return self._get_once(url)
            except (MarketplaceRateLimited, MarketplaceUnavailable) as exc:
                if attempt >= self.retries:
                    raise
                delay = backoff_seconds(attempt, exc.retry_after, cap=BACKOFF_MAX_SECONDS)
                logger.info("marketplace %s; retrying in %.1f s", exc.message, delay)
                self._sleep(delay)
                attempt += 1

    def _get_once(self, url: str) -> dict:
        where = urlsplit(url).path
        try:
            response = self._session.get(url, timeout=TIMEOUT_SECONDS)
        except requests.Timeout as exc:
            raise MarketplaceUnavailable(f"timed out waiting for {where}") from exc
        except requests.RequestException as exc:
            raise MarketplaceUnavailable(
                f"could not connect to the marketplace at {self.base_url} ({type(exc).__name__})"
            ) from exc
        status = response.status_code
        if status == 401:
            raise MarketplaceUnauthorized(
                "The marketplace rejected the email and API token (401). The token may have "
                "expired or been revoked: create a new API token and save all four connection "
                "values again."
            )
        if status == 403:
            raise MarketplaceForbidden(
                f"The marketplace account lacks permission for {where} (403). Check that it can "
                "view the vendor, the app listing and license reporting."
            )
        if status == 404:
            raise MarketplaceNotFound(
                f"The marketplace found nothing at {where} (404). Check the vendor ID and that "
                "the app still belongs to that vendor."
            )
        if status == 429:
            raise MarketplaceRateLimited(
                "rate limited by the marketplace (429)", retry_after=_retry_after(response)
            )
        if status >= 500:
            raise MarketplaceUnavailable(
                f"the marketplace answered {status} for {where}",
                status_code=status,
                retry_after=_retry_after(response),
            )
        if status >= 400:
            raise MarketplaceRequestError(
                f"the marketplace refused the request to {where} ({status})", status_code=status
            )
        try:
            body = response.json()
        except ValueError as exc:
            raise MarketplaceUnavailable(f"unreadable (non-JSON) answer from {where}") from exc
        if not isinstance(body, dict):
            raise MarketplaceUnavailable(f"unexpected answer from {where} (not a JSON object)")
        return body

    # --- endpoints ------------------------------------------------------------------------
    def developer_id(self, vendor_id: str) -> str:
        body = self.get_json(self.url(f"/rest/3/developer-space/vendor/{vendor_id}"))
        developer_id = body.get("developerId")
        if not isinstance(developer_id, str) or not developer_id:
            raise MarketplaceUnavailable("the vendor lookup answered without a developerId")
        return developer_id

    def apps(self, developer_id: str) -> Iterator[App]:
        """Every app of the developer space, following `links.next` cursors."""
        url: str | None = self.url(
            f"/rest/3/product-listing/developer-space/{developer_id}?limit={PAGE_SIZE}"
        )
        for _ in range(MAX_APP_PAGES):
            if url is None:
                return
            body = self.get_json(url)
            for item in body.get("items") or []:
                if isinstance(item, dict) and item.get("productId"):
                    yield App(
                        product_id=str(item["productId"]),
                        app_key=str(item.get("appKey") or ""),
                        app_name=str(item.get("appName") or ""),
                    )
            next_link = (body.get("links") or {}).get("next")
            url = self.url(next_link) if isinstance(next_link, str) and next_link else None

    def licenses_page(self, url: str) -> LicensePage:
        body = self.get_json(url)
        licenses = body.get("licenses")
        if not isinstance(licenses, list):
            raise MarketplaceUnavailable("the license answer has no `licenses` list")
        next_link = (body.get("_links") or {}).get("next")
        if isinstance(next_link, dict):  # documented: {"href": ...}; a bare string is tolerated
            next_link = next_link.get("href")
        total = body.get("totalCount")
        return LicensePage(
            licenses=[item for item in licenses if isinstance(item, dict)],
            next_url=self.url(next_link) if isinstance(next_link, str) and next_link else None,
            total=total if isinstance(total, int) else None,
        )
