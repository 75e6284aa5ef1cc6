"""A fake marketplace API for tests, benchmarks and trying the connection locally.

Serves the endpoints the connection calls, with the documented shapes: the vendor lookup, the
app listing (cursor paging), license reporting (offset paging, `lastUpdated` filtering,
`withDataInsights`), sales transactions (offset paging, `lastUpdated`) and feedback details
(offset paging, `type`, `startDate`). Licenses, their transactions (new sales, renewals,
upgrades, refunds as lines of their own with negative amounts) and uninstall/disable feedback are
generated deterministically from the documented fields, contacts included (which the sync must
not keep). Errors can be injected (429 with Retry-After, 5xx, 401) from code or over HTTP:

    POST /_fake/inject?status=429&count=3&retry_after=1   the next 3 license requests fail
    POST /_fake/inject?status=502&endpoint=transactions   the next transactions request fails
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
_REASONS = ["cost", "expectations", "bugs", "not-meeting-needs", "project-based", "other"]
ENDPOINTS = ("licenses", "transactions", "feedback")  # where faults can be injected


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
        transactions: int | None = None,
    ) -> None:
        """`accounts` (cloudId -> company): the first cloud licenses are these sites' active
        licenses, so they match accounts the service already has (the demo's `acme`).
        `transactions`: how many transaction lines to generate over the licenses (default one
        per license); tests may also set `transactions` and `feedback` lists directly."""
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
        # Their own random stream: the licenses are the same whatever is generated after them.
        revenue_rng = random.Random(seed + 1)
        self.transactions = self._sales(
            revenue_rng, len(self.licenses) if transactions is None else transactions
        )
        self.feedback = self._feedback(revenue_rng)
        self._faults: dict[str, deque[tuple[int, float | None]]] = {
            endpoint: deque() for endpoint in ENDPOINTS
        }
        self._lock = threading.Lock()
        self._filtered: dict[tuple, list[dict]] = {}
        self.requests: list[str] = []
        self._server: ThreadingHTTPServer | None = None

    # --- data -----------------------------------------------------------------------------
    def _generate(self, rng: random.Random, count: int) -> list[dict]:
        licenses: list[dict] = []
        cloud_ids: list[str] = []
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

    def _sales(self, rng: random.Random, count: int) -> list[dict]:
        """`count` transaction lines spread over the licenses: each license's history ends with
        the sale of its current maintenance period (a new sale first, renewals after; now and
        then an upgrade, and a refund of the latest sale as a line of its own)."""
        if not self.licenses or count <= 0:
            return []
        base, extra = divmod(count, len(self.licenses))
        lines: list[dict] = []
        for index, license in enumerate(self.licenses):
            lines.extend(self._history(rng, index, license, base + (index < extra)))
        return lines

    def _history(self, rng: random.Random, index: int, license: dict, lines: int) -> list[dict]:
        if lines <= 0:
            return []
        start = date.fromisoformat(license["maintenanceStartDate"])
        end = date.fromisoformat(license["maintenanceEndDate"])
        annual = (end - start).days > 62
        step = timedelta(days=365 if annual else 30)
        monthly_price = rng.choice([10, 25, 50, 120, 480])
        refund = lines > 1 and rng.random() < 0.05
        sales = lines - refund
        history = []
        for n in range(sales):
            sold = start - step * (sales - 1 - n)
            kind = "New" if n == 0 else ("Upgrade" if rng.random() < 0.05 else "Renewal")
            price = monthly_price * (10 if annual else 1) * (1.5 if kind == "Upgrade" else 1)
            history.append((sold, kind, round(price * 0.75, 2)))
        if refund:
            sold, _, amount = history[-1]
            history.append((sold, "Refund", -amount))
        product = self.apps[0]
        records = []
        for n, (sold, kind, amount) in enumerate(history):
            maintenance_start = history[-1][0] if kind == "Refund" else sold
            record = {
                "transactionId": f"IN-{index:06d}-{n:03d}",
                "transactionLineItemId": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "addonKey": product["appKey"],
                "addonName": product["appName"],
                "productId": product["productId"],
                "lastUpdated": sold.isoformat(),
                "appEdition": license["appEdition"],
                "paymentStatus": "Refunded" if kind == "Refund" else "Paid",
                "customerDetails": {
                    "company": license["contactDetails"]["company"],
                    "country": license["contactDetails"]["country"],
                    "region": license["contactDetails"]["region"],
                    "technicalContact": dict(license["contactDetails"]["technicalContact"]),
                    "billingContact": {"email": f"billing{index}@company{index}.example"},
                },
                "purchaseDetails": {
                    "saleDate": sold.isoformat(),
                    "saleType": kind,
                    "billingPeriod": "Annual" if annual else "Monthly",
                    "licenseType": license["licenseType"],
                    "hosting": license["hosting"],
                    "tier": license["tier"],
                    "purchasePrice": round(amount / 0.75, 2),
                    "vendorAmount": amount,
                    "maintenanceStartDate": maintenance_start.isoformat(),
                    "maintenanceEndDate": (maintenance_start + step).isoformat(),
                },
            }
            for field in ("cloudId", "appEntitlementId", "appEntitlementNumber", "licenseId",
                          "addonLicenseId"):  # fmt: skip
                if field in license:
                    record[field] = license[field]
            records.append(record)
        return records

    def _feedback(self, rng: random.Random) -> list[dict]:
        """An uninstall (or a disable) for about half of the licenses no longer active."""
        records = []
        for index, license in enumerate(self.licenses):
            if license["status"] == "active" or rng.random() < 0.5:
                continue
            record = {
                "addonKey": license["addonKey"],
                "productId": license["productId"],
                "addonVersion": "1.0.0",
                "applicationKey": "jira",
                "hosting": license["hosting"],
                "appEdition": license["appEdition"],
                "date": license["lastUpdated"],
                "feedbackType": rng.choice(["uninstall", "uninstall", "disable"]),
                "reasonKey": rng.choice(_REASONS),
                "reason": "As the customer put it",
                "message": f"Feedback from admin {index}",
                "email": f"admin{index}@company{index}.example",
                "fullName": f"Admin {index}",
            }
            for field in ("cloudId", "appEntitlementId", "appEntitlementNumber", "licenseId"):
                if field in license:
                    record[field] = license[field]
            records.append(record)
        return records

    # --- control --------------------------------------------------------------------------
    def inject(
        self,
        status: int,
        *,
        count: int = 1,
        retry_after: float | None = None,
        endpoint: str = "licenses",
    ) -> None:
        """The next `count` requests to `endpoint` (licenses, transactions, feedback) answer
        `status` (with Retry-After if given)."""
        with self._lock:
            self._faults[endpoint].extend([(status, retry_after)] * count)

    @property
    def pending_faults(self) -> int:
        return sum(len(faults) for faults in self._faults.values())

    def set_token(self, token: str) -> None:
        self.token = token

    @property
    def base_url(self) -> str:
        assert self._server is not None, "call serve() first"
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)  # an AF_INET server's address is (host, port)
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
        endpoint = {
            ("licenses",): "licenses",
            ("sales", "transactions"): "transactions",
            ("feedback", "details"): "feedback",
        }.get(tuple(segments[3:]))
        if segments[:2] == ["reporting", "developer-space"] and len(segments) > 3 and endpoint:
            with self._lock:
                faults = self._faults[endpoint]
                fault = faults.popleft() if faults else None
            if fault is not None:
                status, retry_after = fault
                headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
                return status, headers, {"message": f"injected {status}"}
            if segments[2] != self.developer_id:
                return 404, {}, {"message": "Developer space not found"}
            return 200, {}, self._report(endpoint, target, query)
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

    def _matching(self, endpoint: str, query: dict) -> list[dict]:
        product_id = query.get("productId", "")
        if endpoint == "licenses":
            records, since = self.licenses, query.get("lastUpdated", "")
            wanted = lambda r: r["lastUpdated"] >= since  # noqa: E731
        elif endpoint == "transactions":
            records, since = self.transactions, query.get("lastUpdated", "")
            wanted = lambda r: r["lastUpdated"] >= since  # noqa: E731
        else:
            records, since, kind = self.feedback, query.get("startDate", ""), query.get("type")
            wanted = lambda r: r["date"] >= since and kind in (None, r["feedbackType"])  # noqa: E731
        key = (endpoint, id(records), len(records), product_id, since, query.get("type"))
        with self._lock:
            matching = self._filtered.get(key)
            if matching is None:
                matching = [r for r in records if r.get("productId") == product_id and wanted(r)]
                self._filtered[key] = matching
        return matching

    def _report(self, endpoint: str, target: str, query: dict) -> dict:
        limit = max(1, min(int(query.get("limit", 10)), PAGE_LIMIT))
        offset = max(0, int(query.get("offset", 0)))
        matching = self._matching(endpoint, query)
        page = matching[offset : offset + limit]
        if endpoint == "licenses" and query.get("withDataInsights") != "true":
            page = [{k: v for k, v in r.items() if not k.startswith(_INSIGHTS)} for r in page]
        params = {k: v for k, v in query.items() if k not in {"offset", "limit"}}
        path = urlsplit(target).path.removeprefix("/marketplace")

        def href(at: int) -> str:
            return f"{path}?{urlencode({**params, 'offset': at, 'limit': limit})}"

        links = {"self": {"href": href(offset)}}
        if offset + limit < len(matching):
            links["next"] = {"href": href(offset + limit)}
        return {"_links": links, "totalCount": len(matching), endpoint: page}

    def _control(self, method: str, path: str, query: dict) -> tuple[int, dict, dict]:
        if method == "POST" and path == "/_fake/inject":
            retry_after = query.get("retry_after")
            endpoint = query.get("endpoint", "licenses")
            if endpoint not in ENDPOINTS:
                return 400, {}, {"message": f"endpoint: one of {', '.join(ENDPOINTS)}"}
            self.inject(
                int(query.get("status", 503)),
                count=int(query.get("count", 1)),
                retry_after=float(retry_after) if retry_after else None,
                endpoint=endpoint,
            )
            return 200, {}, {"pending_faults": self.pending_faults}
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
                    "transactions": len(self.transactions),
                    "feedback": len(self.feedback),
                    "requests": len(self.requests),
                    "pending_faults": self.pending_faults,
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
