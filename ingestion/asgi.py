"""The ASGI front door of ingestion: POSTs to the ingestion paths, without a web framework.

Production runs it under uvicorn (see docs/scaling.md). It answers exactly as the DRF views do:
both feed the raw request to `ingestion.core.accept` and store what it accepted through
`ingestion.store`, here by way of the group-commit writer; a 202 is sent only after the commit.
Everything else (other methods on these paths, the admin, the read API, /healthz) goes to Django.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from typing import Any

from ingestion import core
from ingestion.views import ingestion_limits  # one definition of the limits for both doors
from ingestion.writer import GroupCommitWriter

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:  # ASGI servers lower-case header names
            return value.decode("latin-1")
    return None


def _declared_length(scope: Scope) -> int:
    try:
        return int(_header(scope, b"content-length") or 0)
    except ValueError:
        return 0


async def _read_body(receive: Receive, cap: int) -> bytes:
    """The body, or its first `cap` bytes when longer (enough for the core to answer 413)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size >= cap or not message.get("more_body", False):
            break
    return b"".join(chunks)[:cap]


async def _respond(send: Send, status: int, body: dict | None, retry_after: int | None = None):
    headers = [(b"content-length", b"0")]
    payload = b""
    if body is not None:
        # The same compact UTF-8 JSON DRF's renderer writes.
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(payload)),
        ]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode("ascii")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


class IngestionFrontDoor:
    """An ASGI app: ingestion POSTs here, everything else to `fallback` (Django)."""

    def __init__(self, fallback: ASGIApp, *, writer: GroupCommitWriter | None = None) -> None:
        self.fallback = fallback
        self.writer = writer or GroupCommitWriter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            endpoint_name = scope["path"].strip("/")
            if endpoint_name in core.ENDPOINTS:
                await self.ingest(endpoint_name, scope, receive, send)
                return
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        await self.fallback(scope, receive, send)

    async def ingest(self, endpoint_name: str, scope: Scope, receive: Receive, send: Send):
        received_at = datetime.now(UTC)
        limits = ingestion_limits()
        try:
            # Like the DRF view: a declared length past the limit is refused unread.
            limit = core.body_limit(endpoint_name, limits)
            if _declared_length(scope) > limit:
                raise core.too_large(limit)
            raw = await _read_body(receive, limit + 1)  # one byte over is enough for a 413
            outcome = core.accept(
                endpoint_name,
                raw,
                authorization=_header(scope, b"authorization"),
                content_encoding=_header(scope, b"content-encoding"),
                now_ms=int(time.time() * 1000),
                limits=limits,
            )
            if outcome.accepted:
                await self.writer.store([(received_at, accepted) for accepted in outcome.accepted])
        except core.RequestError as error:
            await _respond(send, error.status, error.body(), error.retry_after)
            return
        await _respond(send, outcome.status, outcome.body)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        """Django has no lifespan support; this flushes the writer when the server stops."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # Everything loaded so far (Django, the apps) lives as long as the process: keep it
                # out of the collector, so a full collection does not pause every request in flight.
                gc.freeze()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.writer.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
