"""A fake marketplace API for tests, benchmarks and trying the connection locally.

Serves the three endpoints the connection calls, with the documented shapes: the vendor lookup,
the app listing (cursor paging) and license reporting (offset paging, `lastUpdated` filtering,
`withDataInsights`). Licenses are generated deterministically from the documented fields. Errors
can be injected (429 with Retry-After, 5xx, 401) from code or over HTTP:

    POST /_fake/inject?status=429&count=3&retry_after=1   the next 3 license requests fail
    POST /_fake/token?value=NEW                           only NEW is accepted from now on
    GET  /_fake/state                                     what the fake holds and has served

Only for local use: it binds 127.0.0.1 by default and has no persistence.
"""

from __future__ import annotations

import base64
import json
import random
import threading
import uuid
from collections import deque
from datetime import date, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

PAGE_LIMIT = 50
_TIERS = ["10 Users", "25 Users", "50 Users", "100 Users", "500 Users", "10,000 Users",
          "Unlimited Users", "Evaluation", "Subscription"]  # fmt: skip
_COUNTRIES = [("Germany", "EMEA"), ("United States", "Americas"), ("Japan", "APAC"),
              ("Brazil", "Americas"), ("France", "EMEA"), ("Australia", "APAC")]  # fmt: skip
_INSIGHTS = ("evaluation", "parent", "installedOn", "daysTo")
_TYPES = ["COMMERCIAL"] * 6 + ["EVALUATION", "ACADEMIC", "COMMUNITY", "OPEN_SOURCE"]


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


class FakeMarketplace:
    """The data and behaviour of the fake; `serve()` puts it on a port."""

    def __init__(
        self,
        *,
        licenses: int = 500,
        apps: int = 3,
        email: str = "vendor@example.com",
        token: str = "fake-token",  # noqa: S107 (a fake's well-known credential)
        vendor_id: str = "12345",
        seed: int = 7,
        today: date | None = None,
        accounts: dict[str, str] | None = None,
    ) -> None:
        """`accounts` (cloudId -> company): the first cloud licenses are these sites' active
        licenses, so they match accounts the service already has (the demo's `acme`)."""
        rng = random.Random(seed)
        self.email = email
        self.token = token
        self.vendor_id = vendor_id
        self.developer_id = _uuid(rng)
        self.apps = [
            {
                "productId": _uuid(rng),
                "appKey": f"com.example.app{index}",
                "developerId": self.developer_id,
                "appName": f"Example App {index}",
            }
            for index in range(max(apps, 1))
        ]
        self.product_id = self.apps[0]["productId"]
        self.today = today or date.today()
        self.licenses = self._generate(rng, licenses)
        self._give_to(accounts or {})
        self._faults: deque[tuple[int, float | None]] = deque()
        self._lock = threading.Lock()
        self._filtered: dict[str, list[dict]] = {}
        self.requests: list[str] = []
        self._server: ThreadingHTTPServer | None = None

    # --- data -----------------------------------------------------------------------------
    def _generate(self, rng: random.Random, count: int) -> list[dict]:
        licenses, cloud_ids = [], []
        for index in range(count):
            cloud = rng.random() < 0.85
            record = self._license(rng, index, cloud)
            if cloud:
                if cloud_ids and rng.random() < 0.1:
                    cloud_id = rng.choice(cloud_ids)  # a second license for the same site
                else:
                    cloud_id = _uuid(rng)
                    cloud_ids.append(cloud_id)
                record.update(
                    cloudId=cloud_id,
                    cloudSiteHostname=f"site{len(cloud_ids)}.atlassian.net",
                    appEntitlementId=_uuid(rng),
                    appEntitlementNumber=f"E-{index:03X}-{rng.randint(100, 999)}",
                    hostEntitlementId=_uuid(rng),
                )
            else:
                record.update(
                    addonLicenseId=str(10_000_000 + index), licenseId=f"SEN-{3_000_000 + index}"
                )
            if rng.random() < 0.3:
                record["attribution"] = {
                    "channel": rng.choice(["Organic search", "Paid search", "Direct"]),
                    "referrerDomain": "example.com",
                    "campaignSource": "newsletter",
                    "campaignName": "NA",
                }
            licenses.append(record)
        return licenses

    def _license(self, rng: random.Random, index: int, cloud: bool) -> dict:
        """A license's fields other than its ids (the random draws in a fixed order: the same
        seed gives the same licenses)."""
        app = self.apps[0]
        updated = self.today - timedelta(days=rng.randint(0, 60))
        start = updated - timedelta(days=rng.randint(30, 400))
        end = start + timedelta(days=rng.choice([30, 365]))
        country, region = rng.choice(_COUNTRIES)
        return {
            "addonKey": app["appKey"],
            "addonName": app["appName"],
            "productId": app["productId"],
            "hosting": "Cloud" if cloud else "Data Center",
            "appEdition": rng.choice(["Standard", "Advanced"]),
            "lastUpdated": updated.isoformat(),
            "licenseType": rng.choice(_TYPES),
            "maintenanceStartDate": start.isoformat(),
            "maintenanceEndDate": end.isoformat(),
            "status": rng.choices(["active", "inactive", "cancelled"], [8, 1, 1])[0],
            "tier": rng.choice(_TIERS),
            "contactDetails": {
                "company": f"Company {index}",
                "country": country,
                "region": region,
                "technicalContact": {
                    "email": f"admin{index}@company{index}.example",
                    "name": f"Admin {index}",
                    "phone": "+1 555 0100",
                },
                "billingContact": {"email": f"billing{index}@company{index}.example"},
            },
            "partnerDetails": {"partnerName": "Partner Co", "partnerType": "Expert"},
            "evaluationOpportunitySize": rng.choice(["NA", "10", "50", "500"]),
            "evaluationLicense": rng.choice(["NA", f"SEN-E{index}"]),
            "daysToConvertEval": rng.choice(["NA", "2", "14"]),
            "evaluationStartDate": (start - timedelta(days=30)).isoformat(),
            "evaluationEndDate": start.isoformat(),
            "evaluationSaleDate": rng.choice(["NA", start.isoformat()]),
            "parentProductName": rng.choice(["Jira", "Confluence"]),
            "parentProductEdition": rng.choice(["Free", "Standard", "Premium", "NA"]),
            "parentProductBillingCycle": rng.choice(["MONTHLY", "ANNUAL", "NA"]),
            "installedOnSandbox": rng.choice(["Yes", "No", "No", "No"]),
        }

    def _give_to(self, accounts: dict[str, str]) -> None:
        """After generating, so the other licenses are the same with or without `accounts`."""
        cloud = (record for record in self.licenses if "cloudId" in record)
        for (cloud_id, company), record in zip(accounts.items(), cloud, strict=False):
            record.update(cloudId=cloud_id, status="active", licenseType="COMMERCIAL")
            record["cloudSiteHostname"] = f"{cloud_id}.atlassian.net"
            record["contactDetails"]["company"] = company

    # --- control --------------------------------------------------------------------------
    def inject(self, status: int, *, count: int = 1, retry_after: float | None = None) -> None:
        """The next `count` license requests answer `status` (with Retry-After if given)."""
        with self._lock:
            self._faults.extend([(status, retry_after)] * count)

    def set_token(self, token: str) -> None:
        self.token = token

    @property
    def base_url(self) -> str:
        assert self._server is not None, "call serve() first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def serve(self, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
        fake = self

        class Handler(_Handler):
            marketplace = fake

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        return self._server

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve in a background thread (tests, benchmarks); returns the base URL."""
        server = self.serve(host, port)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # --- endpoints ------------------------------------------------------------------------
    def handle(self, method: str, target: str, authorization: str) -> tuple[int, dict, dict]:
        """(status, headers, body) for one request."""
        parts = urlsplit(target)
        path, query = parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()}
        with self._lock:
            self.requests.append(target)
        if path.startswith("/_fake/"):
            return self._control(method, path, query)
        expected = base64.b64encode(f"{self.email}:{self.token}".encode()).decode()
        if authorization != f"Basic {expected}":
            return 401, {}, {"message": "Unauthorized"}
        prefix = "/marketplace/rest/3/"
        if method != "GET" or not path.startswith(prefix):
            return 404, {}, {"message": "Not found"}
        segments = path[len(prefix) :].strip("/").split("/")
        if segments[:2] == ["developer-space", "vendor"] and len(segments) == 3:
            if segments[2] != self.vendor_id:
                return 404, {}, {"message": "Vendor not found"}
            return 200, {}, {"developerId": self.developer_id}
        if segments[:2] == ["product-listing", "developer-space"] and len(segments) == 3:
            if segments[2] != self.developer_id:
                return 404, {}, {"message": "Developer space not found"}
            return 200, {}, self._listing(query)
        if (
            len(segments) == 4
            and segments[:2] == ["reporting", "developer-space"]
            and segments[3] == "licenses"
        ):
            with self._lock:
                fault = self._faults.popleft() if self._faults else None
            if fault is not None:
                status, retry_after = fault
                headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
                return status, headers, {"message": f"injected {status}"}
            if segments[2] != self.developer_id:
                return 404, {}, {"message": "Developer space not found"}
            return 200, {}, self._licenses(segments[2], query)
        return 404, {}, {"message": "Not found"}

    def _listing(self, query: dict) -> dict:
        limit = min(int(query.get("limit", 10)), PAGE_LIMIT)
        offset = int(base64.urlsafe_b64decode(query["cursor"]).decode()) if "cursor" in query else 0
        items = self.apps[offset : offset + limit]
        base = f"/rest/3/product-listing/developer-space/{self.developer_id}?limit={limit}"
        links = {"self": base}
        if offset + limit < len(self.apps):
            cursor = base64.urlsafe_b64encode(str(offset + limit).encode()).decode()
            links["next"] = f"{base}&cursor={cursor}"
        return {"links": links, "items": items}

    def _licenses(self, developer_id: str, query: dict) -> dict:
        limit = max(1, min(int(query.get("limit", 10)), PAGE_LIMIT))
        offset = max(0, int(query.get("offset", 0)))
        product_id, since = query.get("productId", ""), query.get("lastUpdated", "")
        key = f"{product_id}|{since}"
        with self._lock:
            matching = self._filtered.get(key)
            if matching is None:
                matching = [
                    record
                    for record in self.licenses
                    if record["productId"] == product_id and record["lastUpdated"] >= since
                ]
                self._filtered[key] = matching
        insights = query.get("withDataInsights") == "true"
        page = matching[offset : offset + limit]
        if not insights:
            page = [{k: v for k, v in r.items() if not k.startswith(_INSIGHTS)} for r in page]
        params = {k: v for k, v in query.items() if k not in {"offset", "limit"}}

        def href(at: int) -> str:
            params_at = urlencode({**params, "offset": at, "limit": limit})
            return f"/rest/3/reporting/developer-space/{developer_id}/licenses?{params_at}"

        links = {"self": {"href": href(offset)}}
        if offset + limit < len(matching):
            links["next"] = {"href": href(offset + limit)}
        return {"_links": links, "totalCount": len(matching), "licenses": page}

    def _control(self, method: str, path: str, query: dict) -> tuple[int, dict, dict]:
        if method == "POST" and path == "/_fake/inject":
            retry_after = query.get("retry_after")
            self.inject(
                int(query.get("status", 503)),
                count=int(query.get("count", 1)),
                retry_after=float(retry_after) if retry_after else None,
            )
            return 200, {}, {"pending_faults": len(self._faults)}
        if method == "POST" and path == "/_fake/token" and query.get("value"):
            self.set_token(query["value"])
            return 200, {}, {"token": "changed"}
        if method == "GET" and path == "/_fake/state":
            return (
                200,
                {},
                {
                    "vendor_id": self.vendor_id,
                    "developer_id": self.developer_id,
                    "apps": self.apps,
                    "licenses": len(self.licenses),
                    "requests": len(self.requests),
                    "pending_faults": len(self._faults),
                },
            )
        return 404, {}, {"message": "Not found"}


class _Handler(BaseHTTPRequestHandler):
    marketplace: FakeMarketplace
    protocol_version = "HTTP/1.1"  # keep-alive, as the real API
    # One buffered write per answer and no Nagle delay: headers and body leave together.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        status, headers, body = self.marketplace.handle(
            method, self.path, self.headers.get("Authorization", "")
        )
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        self._answer("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._answer("POST")

    def log_message(self, format: str, *args) -> None:  # quiet: tests and benchmarks
        pass
