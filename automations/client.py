"""The one HTTP client of automations (webhooks, Slack, the score sync): checked targets, a
deadline, typed errors, no redirects, no retries.

One rule decides whether an address may be reached (`address_refusal`), and it runs wherever a
target is met: when an automation or a score sync is saved (`target_check`) and at every request
(`post_json`), whoever sends it. The host is read as an address when it is one, in any spelling
an IPv4 address can take (`2130706433`, `0x7f.1`, `017700000001`, `127.1`), else resolved;
every address it stands for is checked, and the connection goes to an address that was checked,
with the name kept for the Host header, TLS SNI and the certificate check, so a name that
resolves differently a second later cannot slip past. A redirect is an answer like any other,
returned to the caller and never followed: its Location is never contacted.

Refused: every address that is not globally reachable (private, loopback, link-local, shared
100.64.0.0/10, IETF protocol 192.0.0.0/24, benchmarking, documentation, multicast, reserved,
unspecified), and an IPv6 address that carries an IPv4 one (IPv4-mapped, 6to4, NAT64) is judged
as the IPv4 address it carries. `AUTOMATION_ALLOW_PRIVATE_URLS=true` opens the private,
loopback, link-local and shared ranges (on-premises receivers, tests) and nothing else: the
cloud metadata addresses stay refused in every spelling. Errors never carry the URL's path or
query: a Slack webhook URL is a credential.
"""

from __future__ import annotations

import ipaddress
import re
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

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_ip = ipaddress.ip_address

# Where cloud instances read their credentials (AWS, GCP and Azure share 169.254.169.254; AWS's
# IPv6 endpoint; ECS task credentials; Alibaba Cloud). Never reached, whatever the setting says.
METADATA_ADDRESSES = frozenset(
    {_ip("169.254.169.254"), _ip("fd00:ec2::254"), _ip("169.254.170.2"), _ip("100.100.100.200")}
)


class DeliveryError(Exception):
    """A delivery that got no usable answer; `transient` ones are retried on the schedule."""

    transient = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnsafeTarget(DeliveryError):
    """The URL is unusable or stands for an address that may not be reached (`address_refusal`)."""


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


def _nets(*texts: str) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(text) for text in texts)


# The ranges AUTOMATION_ALLOW_PRIVATE_URLS opens: a network of one's own.
_OPENABLE: tuple[tuple[str, tuple[Network, ...]], ...] = (
    ("private", _nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")),
    ("loopback", _nets("127.0.0.0/8", "::1/128")),
    ("link-local", _nets("169.254.0.0/16", "fe80::/10")),
    ("shared", _nets("100.64.0.0/10")),  # carrier-grade NAT
    # RFC 8215's local-use NAT64 prefix: a translator of one's own network.
    ("local NAT64", _nets("64:ff9b:1::/48")),
)
# Never reached. Listed by name (Python's `is_global`, the fallback below, differs between
# versions: 3.11 deems 192.0.0.192, multicast and fec0::/10 global).
_CLOSED: tuple[tuple[str, tuple[Network, ...]], ...] = (
    ("unspecified", _nets("0.0.0.0/8", "::/128")),
    ("Teredo", _nets("2001::/32")),
    ("IETF protocol", _nets("192.0.0.0/24", "2001::/23")),
    ("benchmarking", _nets("198.18.0.0/15", "2001:2::/48")),
    (
        "documentation",
        _nets("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32", "3fff::/20"),
    ),
    ("multicast", _nets("224.0.0.0/4", "ff00::/8")),
    (
        "reserved",
        _nets("240.0.0.0/4", "192.88.99.0/24", "::/8", "100::/64", "fec0::/10"),
    ),
)
# IPv6 forms that carry an IPv4 address and reach it: judged as that address.
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")


def _carried_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, 6to4 or well-known NAT64 address reaches, or None."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address in _MAPPED:
        return address.ipv4_mapped
    if address in _SIX_TO_FOUR:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _local_nat64_candidates(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address a 64:ff9b:1::/48 address may carry: RFC 6052 places it by the
    translator's prefix length (48, 56, 64 or 96 bits), which the address does not tell."""
    bits = int(address)
    octets = [(bits >> (120 - 8 * n)) & 0xFF for n in range(16)]  # octets[8] is RFC 6052's "u"
    placements = (octets[6:8] + octets[9:11], octets[7:8] + octets[9:12], octets[9:13])
    found = [ipaddress.IPv4Address(bytes(placed)) for placed in placements]
    return [*found, ipaddress.IPv4Address(bits & 0xFFFFFFFF)]


def _range_of(address: Address) -> tuple[str, bool] | None:
    """The name of the non-global range `address` is in and whether the setting opens it; None
    for a globally reachable address."""
    for name, networks in _OPENABLE:
        if any(address in network for network in networks):
            return name, True
    for name, networks in _CLOSED:
        if any(address in network for network in networks):
            return name, False
    if not address.is_global:
        return "not globally reachable", False
    return None


def address_refusal(address: Address, *, allow_private: bool) -> str | None:
    """Why `address` may not be reached (what it is), or None when it may: the one rule, used
    at save time and at every request."""
    carried = _carried_ipv4(address)
    if carried is not None:
        refusal = address_refusal(carried, allow_private=allow_private)
        return f"{refusal}, as {carried}" if refusal else None
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if address.version == 6 and address in _LOCAL_NAT64:
        if any(c in METADATA_ADDRESSES for c in _local_nat64_candidates(address)):
            return "a cloud metadata address, through NAT64"
    found = _range_of(address)
    if found is None:
        return None
    name, opened = found
    return None if opened and allow_private else name


# The labels of a host that the URL standard (and inet_aton) read as numbers.
_NUMBER_LABEL = re.compile(r"(0[xX][0-9a-fA-F]*|[0-9]+)")


def _ipv4_spelled(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host written in numbers stands for (1 to 4 parts, each decimal, octal
    with a leading 0, or hexadecimal with 0x, the last filling the bytes left: `127.1`,
    `0x7f.1`, `2130706433`), None for a name; a host that ends in a number but is no address is
    refused, as browsers refuse it."""
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    if not _NUMBER_LABEL.fullmatch(labels[-1]):
        return None
    values = []
    for label in labels:
        if not _NUMBER_LABEL.fullmatch(label):
            raise UnsafeTarget(f"{host} is neither a name nor an IPv4 address")
        if label[:2].lower() == "0x":
            values.append(int(label[2:] or "0", 16))
        elif len(label) > 1 and label.startswith("0"):
            if not set(label) <= set("01234567"):
                raise UnsafeTarget(f"{host} is not an IPv4 address ({label} is not octal)")
            values.append(int(label, 8))
        else:
            values.append(int(label))
    if len(values) > 4:
        raise UnsafeTarget(f"{host} is not an IPv4 address (more than four parts)")
    if any(v > 255 for v in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        raise UnsafeTarget(f"{host} is not an IPv4 address (a part is out of range)")
    number = values[-1]
    for position, value in enumerate(values[:-1]):
        number += value << (8 * (3 - position))
    return ipaddress.IPv4Address(number)


def _addresses(host: str, port: int) -> list[Address]:
    """What `host` stands for: itself when it is an address (however spelled), else every
    address the name resolves to."""
    try:
        return [ipaddress.ip_address(host.split("%", 1)[0])]  # no zone: fe80::1%eth0
    except ValueError:
        pass
    spelled = _ipv4_spelled(host)
    if spelled is not None:
        return [spelled]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise DeliveryConnectionError(f"{host}: the name does not resolve ({exc})") from None
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def _checked_address(host: str, port: int) -> str:
    """The first address `host` stands for, once every one of them may be reached."""
    addresses = _addresses(host, port)
    allow_private = settings.AUTOMATION_ALLOW_PRIVATE_URLS
    refused = {
        str(address): refusal
        for address in addresses
        if (refusal := address_refusal(address, allow_private=allow_private))
    }
    if refused:
        shown = ", ".join(f"{address}: {why}" for address, why in sorted(refused.items()))
        openable = not any(
            address_refusal(a, allow_private=True) for a in addresses if str(a) in refused
        )
        hint = (
            "; set AUTOMATION_ALLOW_PRIVATE_URLS=true for on-premises receivers" if openable else ""
        )
        raise UnsafeTarget(f"{host} is not a reachable public address ({shown}){hint}")
    return str(addresses[0])


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
