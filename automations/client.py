"""The one HTTP client of automation deliveries (webhooks, Slack): checked targets, a deadline,
typed errors, no redirects, no retries.

A target a user typed must not reach the service's own network: the name is resolved, every
address is checked (private, loopback, link-local, cloud metadata, multicast, reserved), and the
connection goes to an address that was checked, with the name kept for the Host header, TLS SNI
and the certificate check, so a name that resolves differently a second later cannot slip past.
`AUTOMATION_ALLOW_PRIVATE_URLS=true` allows private targets (on-premises receivers, tests).
Errors never carry the URL's path or query: a Slack webhook URL is a credential.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter

CONNECT_TIMEOUT_SECONDS = 5.0
DEADLINE_SECONDS = 15.0  # a 2xx must arrive within this, answer read included
MAX_BODY_BYTES = 64 * 1024
EXCERPT_BYTES = 1024
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}


class DeliveryError(Exception):
    """A delivery that got no usable answer; `transient` ones are retried on the schedule."""

    transient = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnsafeTarget(DeliveryError):
    """The URL is unusable or points at a private, loopback, link-local or metadata address."""


class DeliveryTimeout(DeliveryError):
    transient = True


class DeliveryConnectionError(DeliveryError):
    transient = True


@dataclass(frozen=True, slots=True)
class DeliveryResponse:
    status_code: int
    latency_ms: int
    body_excerpt: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status_code < 300


def is_retryable(status_code: int) -> bool:
    """429 and 5xx are worth another attempt; any other answer is final."""
    return status_code == 429 or status_code >= 500


def _refused(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address in _METADATA
        or address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or (isinstance(address, ipaddress.IPv4Address) and address in _SHARED)
    )


_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT, private in practice


def _parts(url: str) -> tuple[str, str, int]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeTarget(f"not a usable URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise UnsafeTarget("the URL must start with http:// or https://")
    if not parts.hostname:
        raise UnsafeTarget("the URL needs a host")
    if parts.username or parts.password:
        raise UnsafeTarget("the URL must not carry a user name or password")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def _checked_address(host: str, port: int) -> str:
    """The first address of `host`, once every address it resolves to is allowed."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise DeliveryConnectionError(f"{host}: the name does not resolve ({exc})") from None
    addresses = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
    if not settings.AUTOMATION_ALLOW_PRIVATE_URLS:
        refused = [str(a) for a in addresses if _refused(a)]
        if refused:
            raise UnsafeTarget(
                f"{host} resolves to a private, loopback, link-local or metadata address "
                f"({', '.join(sorted(set(refused)))}); set AUTOMATION_ALLOW_PRIVATE_URLS=true "
                "for on-premises receivers"
            )
    return str(addresses[0])


def target_check(url: str) -> None:
    """Refuse, when an automation is saved, a URL that could not be delivered to safely."""
    _, host, port = _parts(url)
    try:
        _checked_address(host, port)
    except DeliveryConnectionError as exc:
        raise UnsafeTarget(exc.message) from None


class _PinnedAdapter(HTTPAdapter):
    """Connects to the checked address; the certificate and SNI still name the host."""

    def __init__(self, hostname: str) -> None:
        self._hostname = hostname
        super().__init__(max_retries=0)

    def init_poolmanager(self, connections, maxsize, block=False, **pool_kwargs) -> None:
        pool_kwargs.update(server_hostname=self._hostname, assert_hostname=self._hostname)
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)


def post_json(
    url: str, body: bytes, headers: dict[str, str], *, timeout: float = DEADLINE_SECONDS
) -> DeliveryResponse:
    """POST `body` as JSON; an answer of any status is returned, a missing one raised."""
    scheme, host, port = _parts(url)
    address = _checked_address(host, port)
    parts = urlsplit(url)
    shown = f"[{address}]" if ":" in address else address
    pinned = urlunsplit((scheme, f"{shown}:{port}", parts.path or "/", parts.query, ""))
    host_header = host if port == (443 if scheme == "https" else 80) else f"{host}:{port}"
    session = requests.Session()
    session.trust_env = False  # no proxy from the environment: it would see the checked name
    session.mount(f"{scheme}://", _PinnedAdapter(host))
    started = time.monotonic()
    try:
        with session.post(
            pinned,
            data=body,
            headers={**headers, "Host": host_header, "Content-Type": "application/json"},
            timeout=(min(CONNECT_TIMEOUT_SECONDS, timeout), timeout),
            allow_redirects=False,
            stream=True,
        ) as response:
            content = _read(response, started + timeout, host)
            latency = int((time.monotonic() - started) * 1000)
            return DeliveryResponse(
                status_code=response.status_code,
                latency_ms=latency,
                body_excerpt=content[:EXCERPT_BYTES].decode("utf-8", errors="replace"),
            )
    except requests.Timeout:
        raise DeliveryTimeout(f"{host}: no answer within {timeout:g} s") from None
    except requests.RequestException as exc:
        raise DeliveryConnectionError(f"{host}: {type(exc).__name__}") from None
    finally:
        session.close()


def _read(response: requests.Response, deadline: float, host: str) -> bytes:
    """Up to MAX_BODY_BYTES of the answer, within the deadline however slowly it drips in."""
    content = b""
    for chunk in response.iter_content(chunk_size=8192):
        content += chunk
        if time.monotonic() > deadline:
            raise DeliveryTimeout(f"{host}: the answer did not end within the deadline")
        if len(content) >= MAX_BODY_BYTES:
            break
    return content
