"""Health of what feeds a product, as typed records the dashboard shows.

The data lives in other apps (ingestion's store and drop log, the marketplace connection), and
engagement imports none of them: each app registers a provider here from its AppConfig.ready(),
and readers ask this module. A provider that is not registered (an app not installed) shows as
nothing, not as an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime


@dataclass(frozen=True, slots=True)
class MinuteCount:
    minute: datetime
    requests: int


@dataclass(frozen=True, slots=True)
class Backlog:
    """Accepted requests of the product a worker has not applied yet."""

    requests: int
    oldest_received_at: datetime | None


@dataclass(frozen=True, slots=True)
class DropSummary:
    """Drops with one reason, key and endpoint since the window began."""

    reason: str
    reason_label: str
    key_fingerprint: str
    endpoint: str
    drops: int
    messages: int
    last_dropped_at: datetime
    last_detail: str


@dataclass(frozen=True, slots=True)
class KeyActivity:
    label: str
    fingerprint: str
    active: bool
    created_at: datetime
    last_request_at: datetime | None
    key_id: int = 0
    allowed_origins: str = ""  # one origin a line; empty: any


@dataclass(frozen=True, slots=True)
class AnonymousCount:
    """Messages only an anonymousId named, under one key on one day: counted, not applied."""

    key_fingerprint: str
    day: date
    messages: int


@dataclass(frozen=True, slots=True)
class IngestionHealth:
    since: datetime
    accepted_per_minute: list[MinuteCount]  # oldest first, minutes without requests left out
    backlog: Backlog
    drops: list[DropSummary]  # most drops first
    keys: list[KeyActivity]
    anonymous: list[AnonymousCount] = field(default_factory=list)  # newest day first


@dataclass(frozen=True, slots=True)
class ConnectionHealth:
    """An outside source that writes into the product (the marketplace connection)."""

    name: str
    state: str
    state_label: str
    healthy: bool
    last_run_at: datetime | None
    last_run_outcome: str
    last_success_at: datetime | None
    last_error: str
    last_error_at: datetime | None
    warning: str = ""  # what needs doing before it breaks (e.g. a credential about to expire)


# (product id, since, include drops no product can be told: unknown keys) -> IngestionHealth
IngestionProvider = Callable[[int, datetime, bool], IngestionHealth]
# (product id) -> the product's connections (none configured: an empty list)
ConnectionProvider = Callable[[int], list[ConnectionHealth]]

# (product id, key id, allowed origins text) -> None; ValidationError for a bad text,
# LookupError for a key the product does not have
KeyOriginsSetter = Callable[[int, int, str], None]

_ingestion_providers: list[IngestionProvider] = []
_connection_providers: list[ConnectionProvider] = []
_key_origins_setters: list[KeyOriginsSetter] = []


def key_origins_setter_register(setter: KeyOriginsSetter) -> None:
    if setter not in _key_origins_setters:
        _key_origins_setters.append(setter)


def key_allowed_origins_set(*, product_id: int, key_id: int, allowed_origins: str) -> None:
    """Set the origin allowlist of one of the product's ingestion keys (through the ingestion
    app, which owns keys); LookupError when no app owns keys or the key is not the product's."""
    if not _key_origins_setters:
        raise LookupError("no app manages ingestion keys")
    _key_origins_setters[0](product_id, key_id, allowed_origins)


def ingestion_provider_register(provider: IngestionProvider) -> None:
    if provider not in _ingestion_providers:
        _ingestion_providers.append(provider)


def connection_provider_register(provider: ConnectionProvider) -> None:
    if provider not in _connection_providers:
        _connection_providers.append(provider)


def ingestion_health(
    *, product_id: int, since: datetime, include_unattributed: bool = False
) -> IngestionHealth | None:
    """What the ingestion provider reports for the product; None if none is registered."""
    if not _ingestion_providers:
        return None
    return _ingestion_providers[0](product_id, since, include_unattributed)


def connection_health(*, product_id: int) -> list[ConnectionHealth]:
    found: list[ConnectionHealth] = []
    for provider in _connection_providers:
        found.extend(provider(product_id))
    return found
