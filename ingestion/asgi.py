"""The ingestion front door: every request to an ingestion path, without a web framework.

The one door of ingestion: every way the service runs serves it under uvicorn (Procfile, README;
see docs/scaling.md). It hands the request to the rules of `ingestion.acceptance` and stores what
they accepted through `ingestion.store` (in production by way of the group-commit writer); a 2xx
is sent only after the commit. Other methods on an ingestion path get a 405. Everything else goes
to Django: other paths, the admin, the read API, /healthz, and a request whose Host Django would
refuse (Django answers it with its 400).
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http.request import split_domain_port, validate_host

from config.api_errors import error_body
from config.metrics import door_answer_count, door_answer_counts_flush
from config.metrics_files import web_worker_started, web_worker_stopped
from ingestion import acceptance
from ingestion.acceptance import http
from ingestion.key_checks import KeyChecks
from ingestion.limits import ingestion_limits
from ingestion.store import Entry, store_accepted_batch
from ingestion.writer import GroupCommitWriter

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Store(Protocol):
    """Where the door stores what it accepted: `store` returns once it is committed (or raises a
    503 `RequestError`); `close` writes what is waiting, on server shutdown."""

    async def store(self, entries: Sequence[Entry]) -> None: ...

    async def close(self) -> None: ...


class InlineStore:
    """Stores each request on its own, on the calling thread, in the caller's transaction if
    any: the same `store_accepted_batch` as the group-commit writer, without the writer's thread
    (the in-process test client drives the door this way; see tests/doorclient.py)."""

    async def store(self, entries: Sequence[Entry]) -> None:
        store_accepted_batch(entries)

    async def close(self) -> None:
        return None


class _Disconnected(Exception):
    """The client went away before its body arrived whole."""


async def _rest_of_body(receive: Receive, first: Message, cap: int) -> bytes:
    """The whole body that `first` began (its first ASGI message, with more to come), or its
    first `cap` bytes when longer (enough to answer 413)."""
    chunks = [first.get("body", b"")]
    size = len(chunks[0])
    while size < cap:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)[:cap]


# Answers of the two checks below, remembered per process: they read only settings (and a Host
# value, of which a few usual ones are remembered), and settings change only in tests.
_hosts_allowed: dict[bytes, bool] = {}
_security_headers: dict[str, list[tuple[bytes, bytes]]] = {}
_REMEMBERED_HOSTS = 64


_key_rate_limited: list[bool] = []  # whether INGESTION_KEY_RATE_LIMIT is set, once read


@receiver(setting_changed)
def _forget_settings(**kwargs: object) -> None:
    _hosts_allowed.clear()
    _security_headers.clear()
    _key_rate_limited.clear()


def _key_rate_limit_on() -> bool:
    """Whether INGESTION_KEY_RATE_LIMIT is set (read once): without it and without an origin,
    a request's keys need no check, and the door skips the checks' await entirely."""
    if not _key_rate_limited:
        _key_rate_limited.append(bool(settings.INGESTION_KEY_RATE_LIMIT))
    return _key_rate_limited[0]


def _host_allowed(head: http.Head) -> bool:
    """What Django's `request.get_host()` checks, for a request with a Host header and no
    X-Forwarded-Host in use; anything else goes to Django to decide."""
    host = head.get(b"host")
    if host is None:
        return False
    allowed = _hosts_allowed.get(host)
    if allowed is None:
        allowed = _host_check(host.decode("latin-1"))
        if len(host) <= 255:  # bounded in bytes: a client chooses the value
            if len(_hosts_allowed) >= _REMEMBERED_HOSTS:
                _hosts_allowed.clear()
            _hosts_allowed[host] = allowed
    return allowed


def _host_check(host: str) -> bool:
    if settings.USE_X_FORWARDED_HOST:
        return False
    allowed_hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed_hosts:
        allowed_hosts = [".localhost", "127.0.0.1", "[::1]"]
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed_hosts)


def security_headers(scheme: str) -> list[tuple[bytes, bytes]]:
    """The headers Django's SecurityMiddleware and XFrameOptionsMiddleware add to Django's
    answers, from the same settings, so the door's answers carry them too."""
    headers = _security_headers.get(scheme)
    if headers is None:
        headers = _security_headers[scheme] = _security_headers_from_settings(scheme)
    return headers


def _security_headers_from_settings(scheme: str) -> list[tuple[bytes, bytes]]:
    headers = []
    if settings.SECURE_HSTS_SECONDS and scheme == "https":
        value = f"max-age={settings.SECURE_HSTS_SECONDS}"
        if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS:
            value += "; includeSubDomains"
        if settings.SECURE_HSTS_PRELOAD:
            value += "; preload"
        headers.append((b"strict-transport-security", value.encode()))
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers.append((b"x-content-type-options", b"nosniff"))
    if settings.SECURE_REFERRER_POLICY:
        policy = settings.SECURE_REFERRER_POLICY
        # Django takes a list of policies too; django-stubs type the setting as one string.
        if not isinstance(policy, str):
            policy = ",".join(policy)  # type: ignore[unreachable]
        headers.append((b"referrer-policy", policy.encode()))
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        headers.append(
            (b"cross-origin-opener-policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY.encode())
        )
    headers.append((b"x-frame-options", getattr(settings, "X_FRAME_OPTIONS", "DENY").encode()))
    return headers


# The requests counter labels an endpoint by a stable name (bounded, unlike paths).
_URL_NAMES = {name: f"ingest-{name.replace('/', '-')}" for name in acceptance.ENDPOINTS}


# CORS: ingestion keys are write keys that live in web pages, so any page may send (a key's
# allowlist narrows that, ingestion.key_checks). No cookie is ever read, so no credentials.
_CORS_METHODS = b"POST, OPTIONS"
_CORS_HEADERS = "authorization, content-type, content-encoding"
_CORS_MAX_AGE = b"7200"  # what Chromium caps a preflight's cache at


def _cors_headers(origin: str | None) -> list[tuple[bytes, bytes]]:
    if origin is None:
        return []
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-expose-headers", b"retry-after"),
        (b"vary", b"origin"),
    ]


async def _preflight(send: Send, scope: Scope, endpoint_name: str, head: http.Head) -> None:
    """OPTIONS: 204 naming the request's origin (any), POST and the headers it asked for."""
    door_answer_count(_URL_NAMES[endpoint_name], 204)
    asked = head.value(b"access-control-request-headers")
    allowed = _CORS_HEADERS + (f", {asked}" if asked else "")
    origin = head.value(b"origin")
    answer = [
        *_cors_headers("*" if origin is None else origin),
        (b"access-control-allow-methods", _CORS_METHODS),
        (b"access-control-allow-headers", allowed.encode("latin-1")),
        (b"access-control-max-age", _CORS_MAX_AGE),
        *security_headers(scope.get("scheme", "http")),
    ]
    await send({"type": "http.response.start", "status": 204, "headers": answer})
    await send({"type": "http.response.body", "body": b""})


# Compact UTF-8 JSON, whatever the request's Accept says (ingestion has one answer). One encoder
# for the process: json.dumps with these options builds a new one for every answer.
_ANSWER_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


async def _respond(
    send: Send,
    scope: Scope,
    endpoint_name: str,
    status: int,
    body: dict | None,
    retry_after: int | None = None,
    allow: bytes | None = None,
    origin: str | None = None,
) -> None:
    door_answer_count(_URL_NAMES[endpoint_name], status)
    headers = [(b"content-length", b"0")]
    payload = b""
    if body is not None:
        payload = _ANSWER_JSON.encode(body).encode("utf-8")
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(payload)),
        ]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode("ascii")))
    if allow is not None:
        headers.append((b"allow", allow))
    if origin is not None:
        headers.extend(_cors_headers(origin))
    headers.extend(security_headers(scope.get("scheme", "http")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def _not_allowed(send: Send, scope: Scope, endpoint_name: str, origin: str | None) -> None:
    method = scope["method"]
    body: dict | None = error_body("method_not_allowed", f'Method "{method}" not allowed.')
    if method == "HEAD":
        body = None
    await _respond(send, scope, endpoint_name, 405, body, allow=b"POST, OPTIONS", origin=origin)


class IngestionFrontDoor:
    """An ASGI app: requests to the ingestion paths here, everything else to `fallback` (Django).

    `writer` stores what the door accepted: the group-commit writer unless told otherwise;
    `key_checks` checks keys' origins and rates (on a thread unless told otherwise)."""

    def __init__(
        self,
        fallback: ASGIApp,
        *,
        writer: Store | None = None,
        key_checks: KeyChecks | None = None,
    ) -> None:
        self.fallback = fallback
        self.writer = writer if writer is not None else GroupCommitWriter()
        self.key_checks = key_checks if key_checks is not None else KeyChecks()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            endpoint_name = http.endpoint_for_path(scope["path"])
            if endpoint_name is not None:
                try:
                    head = http.read_head(scope["headers"])
                except acceptance.RequestError as error:
                    await _respond(send, scope, endpoint_name, error.status, error.body())
                    return
                if _host_allowed(head):
                    method = scope["method"]
                    if method == "POST":
                        await self.ingest(endpoint_name, scope, head, receive, send)
                    elif method == "OPTIONS":
                        await _preflight(send, scope, endpoint_name, head)
                    else:
                        await _not_allowed(send, scope, endpoint_name, head.value(b"origin"))
                    return
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        await self.fallback(scope, receive, send)

    async def ingest(
        self, endpoint_name: str, scope: Scope, head: http.Head, receive: Receive, send: Send
    ) -> None:
        received_at = datetime.now(UTC)
        origin = head.value(b"origin")
        limits = ingestion_limits()
        limit = acceptance.body_limit(endpoint_name, limits)
        target = len(scope.get("raw_path") or scope["path"].encode()) + len(scope["query_string"])
        try:
            http.check_head(head, target + (1 if scope["query_string"] else 0), limit)
            # One byte over the limit is enough for a 413. A small body comes in one message:
            # read here, without a coroutine of its own.
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            if message.get("more_body", False):
                raw = await _rest_of_body(receive, message, limit + 1)
            else:
                raw = message.get("body", b"")[: limit + 1]
            outcome = acceptance.accept(
                endpoint_name,
                raw,
                authorization=head.value(b"authorization"),
                content_encoding=head.value(b"content-encoding"),
                now_ms=int(time.time() * 1000),
                limits=limits,
            )
            if outcome.accepted:
                if origin is not None or _key_rate_limit_on():
                    await self.key_checks.check(
                        [accepted.key_digest for accepted in outcome.accepted], origin
                    )
                await self.writer.store([(received_at, accepted) for accepted in outcome.accepted])
        except _Disconnected:
            return  # nothing stored, and nobody to answer
        except acceptance.RequestError as error:
            await _respond(
                send,
                scope,
                endpoint_name,
                error.status,
                error.body(),
                error.retry_after,
                origin=origin,
            )
            return
        await _respond(send, scope, endpoint_name, outcome.status, outcome.body, origin=origin)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        """Django has no lifespan support; this tidies the metrics directory when the server
        starts, and flushes the writer and the door's counts when it stops."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                web_worker_started(settings.PROMETHEUS_MULTIPROC_DIR, os.getppid())
                # Everything loaded so far (Django, the apps) lives as long as the process: keep it
                # out of the collector, so a full collection does not pause every request in flight.
                gc.freeze()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.writer.close()
                door_answer_counts_flush()
                web_worker_stopped(os.getpid())
                await send({"type": "lifespan.shutdown.complete"})
                return
