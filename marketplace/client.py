"""The one HTTP client of the marketplace API: a deadline per request, typed errors, no retries.

Every request uses HTTP Basic (account email, API token) and `Accept: application/json` and ends
within `deadline` seconds, however slowly the answer drips in. Failures become typed errors:
permanent ones (401, 403, 404, other 4xx, an answer of the wrong shape) say what to check;
transient ones (429, 5xx, timeouts, connection errors, unreadable bodies) carry `retry_after` for
the caller. Nothing here sleeps or retries: the sync task retries later, between task attempts,
so a worker is never held waiting. No other module imports `requests`, and the token never
appears in an error (errors are raised without the library's exception chained, whose frames
hold the request headers).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

import requests
from django.conf import settings
from django.views.decorators.debug import sensitive_variables

PAGE_SIZE = 50
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 10.0  # the longest silence between two pieces of an answer
DEADLINE_SECONDS = 60.0  # the longest a whole request may take, answer read included
MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_APP_PAGES = 100  # bounds the cursor loop of the product listing (5,000 apps)
_CHUNK = 64 * 1024


class MarketplaceError(Exception):
    """Base of every failure talking to the marketplace; `message` is for the admin."""

    transient = False
    status_code: int | None = None
    retry_after: float | None = None

    def __init__(
        self, message: str, *, status_code: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code
        self.retry_after = retry_after


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


class MarketplaceBadAnswer(MarketplaceError):
    """A JSON answer of a shape the API does not document (e.g. `_links` a string)."""


class MarketplaceRateLimited(MarketplaceError):
    """429: slow down; `retry_after` seconds when the marketplace said so."""

    transient = True
    status_code = 429


class MarketplaceUnavailable(MarketplaceError):
    """5xx, timeout, connection error or an unreadable body: try again later."""

    transient = True


class BadNumber:
    """A JSON number no column can hold (NaN, Infinity, 1e999, thousands of digits).

    The client reads it as this marker instead of failing the whole page, so the mapping can
    skip the one license that carries it and say why.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text[:40] + ("..." if len(text) > 40 else "")

    def __repr__(self) -> str:
        return f"BadNumber({self.text!r})"


def _int(text: str) -> int | BadNumber:
    try:
        return int(text)
    except ValueError:  # longer than Python's int-from-text limit
        return BadNumber(text)


def _float(text: str) -> float | BadNumber:
    number = float(text)
    return number if math.isfinite(number) else BadNumber(text)


def parse_json(data: bytes) -> object:
    """JSON as the marketplace sends it; unstorable numbers become BadNumber markers."""
    return json.loads(data, parse_int=_int, parse_float=_float, parse_constant=BadNumber)


@dataclass(frozen=True, slots=True)
class App:
    product_id: str
    app_key: str
    app_name: str


@dataclass(frozen=True, slots=True)
class LicensePage:
    licenses: list  # the records as sent; the mapping decides what each one is worth
    next_url: str | None
    total: int | None


@dataclass(frozen=True, slots=True)
class ReportPage:
    """One page of a reporting list (licenses, transactions, feedback): the records as sent."""

    records: list
    next_url: str | None
    total: int | None


# The reporting lists a sync reads, by the key of their records in the answer.
LICENSES, TRANSACTIONS, FEEDBACK = "licenses", "transactions", "feedback"


def _retry_after(response: requests.Response) -> float | None:
    raw = response.headers.get("Retry-After", "").strip()
    try:
        value = float(raw) if raw else None
    except ValueError:
        return None  # an HTTP date: the caller's own backoff applies
    return max(0.0, value) if value is not None and math.isfinite(value) else None


class MarketplaceClient:
    """Read-only requests for one set of credentials."""

    @sensitive_variables("api_token")
    def __init__(
        self,
        *,
        email: str,
        api_token: str,
        base_url: str | None = None,
        deadline: float = DEADLINE_SECONDS,
        read_timeout: float = READ_TIMEOUT_SECONDS,
    ) -> None:
        self.base_url = (base_url or settings.MARKETPLACE_API_URL).rstrip("/")
        self.deadline = deadline
        self.read_timeout = read_timeout
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
        self,
        *,
        developer_id: str,
        product_id: str,
        last_updated: str | None = None,
        limit: int = PAGE_SIZE,
    ) -> str:
        query = {"productId": product_id, "withDataInsights": "true", "lastUpdated": last_updated}
        return self._reporting_url(developer_id, "licenses", query, limit)

    def transactions_url(
        self,
        *,
        developer_id: str,
        product_id: str,
        last_updated: str | None = None,
        limit: int = PAGE_SIZE,
    ) -> str:
        """The app's sales transactions (refunds included), those updated since a day if given."""
        query = {"productId": product_id, "lastUpdated": last_updated}
        return self._reporting_url(developer_id, "sales/transactions", query, limit)

    def feedback_url(
        self,
        *,
        developer_id: str,
        product_id: str,
        start_date: str | None = None,
        limit: int = PAGE_SIZE,
    ) -> str:
        """The app's uninstall feedback (not disable), that given on or after a day if given."""
        query = {"productId": product_id, "type": "uninstall", "startDate": start_date}
        return self._reporting_url(developer_id, "feedback/details", query, limit)

    def _reporting_url(
        self, developer_id: str, listing: str, query: dict[str, str | None], limit: int
    ) -> str:
        """The first page of one of the developer space's reporting lists; a filter given as
        None is left out."""
        given = {name: value for name, value in query.items() if value}
        page = urlencode({**given, "limit": limit, "offset": 0})
        return self.url(f"/rest/3/reporting/developer-space/{developer_id}/{listing}?{page}")

    # --- requests -------------------------------------------------------------------------
    def get_json(self, url: str) -> dict:
        """One GET, finished within the deadline; the JSON object answered or a typed error."""
        where = urlsplit(url).path
        started = time.monotonic()
        try:
            response = self._session.get(
                url, timeout=(CONNECT_TIMEOUT_SECONDS, self.read_timeout), stream=True
            )
        except requests.Timeout:
            raise MarketplaceUnavailable(f"timed out waiting for {where}") from None
        except Exception as exc:  # any transport failure is the marketplace being unreachable
            raise MarketplaceUnavailable(
                f"could not connect to the marketplace at {self.base_url} ({type(exc).__name__})"
            ) from None
        try:
            _raise_for_status(response, where)
            data = self._read_body(response, where, started)
        finally:
            response.close()
        try:
            body = parse_json(data)
        except ValueError:
            raise MarketplaceUnavailable(f"unreadable (non-JSON) answer from {where}") from None
        if not isinstance(body, dict):
            raise MarketplaceBadAnswer(f"unexpected answer from {where} (not a JSON object)")
        return body

    def _read_body(self, response: requests.Response, where: str, started: float) -> bytes:
        """The body, piece by piece, so a slowly dripping answer cannot outlast the deadline."""
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                if time.monotonic() - started > self.deadline:
                    raise MarketplaceUnavailable(
                        f"the answer from {where} took longer than {self.deadline:.0f} s"
                    )
                chunk = response.raw.read1(_CHUNK, decode_content=True)
                if not chunk:
                    return b"".join(chunks)
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise MarketplaceUnavailable(f"the answer from {where} is too large")
                chunks.append(chunk)
        except MarketplaceError:
            raise
        except Exception as exc:  # a read timeout or a connection cut part-way
            raise MarketplaceUnavailable(
                f"the answer from {where} was cut off ({type(exc).__name__})"
            ) from None

    # --- endpoints ------------------------------------------------------------------------
    def developer_id(self, vendor_id: str) -> str:
        body = self.get_json(self.url(f"/rest/3/developer-space/vendor/{vendor_id}"))
        developer_id = body.get("developerId")
        if not isinstance(developer_id, str) or not developer_id:
            raise MarketplaceBadAnswer("the vendor lookup answered without a developerId")
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
            items, links = body.get("items") or [], body.get("links") or {}
            if not isinstance(items, list) or not isinstance(links, dict):
                raise MarketplaceBadAnswer(
                    "the app listing answered in an unexpected shape (`items` must be a list, "
                    "`links` an object)"
                )
            for item in items:
                if isinstance(item, dict) and isinstance(item.get("productId"), str):
                    yield App(
                        product_id=item["productId"],
                        app_key=_text(item.get("appKey")),
                        app_name=_text(item.get("appName")),
                    )
            next_link = links.get("next")
            url = self.url(next_link) if isinstance(next_link, str) and next_link else None

    def licenses_page(self, url: str) -> LicensePage:
        page = self.report_page(url, LICENSES)
        return LicensePage(licenses=page.records, next_url=page.next_url, total=page.total)

    def report_page(self, url: str, key: str) -> ReportPage:
        """One page of a reporting list whose records are under `key`, with the link to the
        next page (`_links.next.href`; absent on the last page)."""
        body = self.get_json(url)
        where = urlsplit(url).path
        noun = "license" if key == LICENSES else key.rstrip("s")
        records, links = body.get(key), body.get("_links", {})
        if not isinstance(records, list):
            raise MarketplaceBadAnswer(f"the {noun} answer from {where} has no `{key}` list")
        if links is None:
            links = {}
        if not isinstance(links, dict):
            raise MarketplaceBadAnswer(
                f"the {noun} answer from {where} has `_links` as {type(links).__name__}, "
                "not an object"
            )
        next_link = links.get("next")
        if isinstance(next_link, dict):  # documented: {"href": ...}; a bare string is tolerated
            next_link = next_link.get("href")
        if next_link is not None and not isinstance(next_link, str):
            raise MarketplaceBadAnswer(
                f"the {noun} answer from {where} has a `_links.next` that is not a link"
            )
        total = body.get("totalCount")
        return ReportPage(
            records=records,
            next_url=self.url(next_link) if next_link else None,
            total=total if isinstance(total, int) else None,
        )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _raise_for_status(response: requests.Response, where: str) -> None:
    status = response.status_code
    if status < 400:
        return
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
    raise MarketplaceRequestError(
        f"the marketplace refused the request to {where} ({status})", status_code=status
    )
