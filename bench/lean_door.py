"""The lean durable door of bench_ingest (issue 33): the least a durable POST /v2/track can do.

A raw ASGI app (no Django, no framework) under the door's uvicorn command line: it reads the
body, parses it (json.loads), checks that an Authorization header is there, and stores the
request with group commit: the requests of concurrent connections gathered for a short window,
written with one COPY (its own transaction) on one psycopg 3 connection per process; 202 only
after the commit. The connection is an async one on the event loop, not a writer thread's as in
the door: here it took fewer CPU microseconds a request, at the same speed within the noise. A
row per request, in a table with the kind of columns and the index of ingestion_acceptedrequest
(the door groups a write's requests under one key into one row: it writes fewer rows).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from typing import Any

import psycopg

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Row = tuple[datetime, str, str]

TABLE = "bench_lean_accepted"
# The same window as the door's group-commit writer (ingestion/writer.py GATHER_SECONDS).
GATHER_SECONDS = 0.001
_CREATE = f"""
SELECT pg_advisory_xact_lock(33);  -- the server's workers start together: one creates it
CREATE TABLE IF NOT EXISTS {TABLE} (
    id bigserial PRIMARY KEY, received_at timestamptz NOT NULL, key_digest text NOT NULL,
    body jsonb NOT NULL);
CREATE INDEX IF NOT EXISTS {TABLE}_received_idx ON {TABLE} (received_at);
"""
_COPY = f"COPY {TABLE} (received_at, key_digest, body) FROM STDIN"


class GroupCommit:
    """One per process: requests wait in `pending`; one task writes them all with one COPY."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pending: list[tuple[Row, asyncio.Future[None]]] = []
        self.wake = asyncio.Event()
        self.last_batch = 2  # a write goes before its window ends once this many wait
        self.connection: psycopg.AsyncConnection | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        async with await psycopg.AsyncConnection.connect(self.url) as setup:
            await setup.execute(_CREATE)  # one transaction: the lock holds until it commits
        self.connection = await self.connect()
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def connect(self) -> psycopg.AsyncConnection:
        return await psycopg.AsyncConnection.connect(self.url, autocommit=True)

    async def store(self, row: Row) -> None:
        """Return once `row` is committed; raise what the write raised otherwise."""
        done = asyncio.get_running_loop().create_future()
        self.pending.append((row, done))
        self.wake.set()
        await done

    async def run(self) -> None:
        assert self.connection is not None
        while True:
            await self.wake.wait()
            self.wake.clear()
            # Wait for company (other connections' requests) unless as many wait as last time:
            # a commit per request would cost far more than the window.
            if len(self.pending) < self.last_batch:
                await asyncio.sleep(GATHER_SECONDS)
            batch, self.pending = self.pending, []
            self.last_batch = max(len(batch), 2)
            try:
                # Autocommit: the COPY is a transaction of its own, committed (WAL flushed)
                # before it returns, without BEGIN and COMMIT round trips.
                async with self.connection.cursor().copy(_COPY) as copy:
                    for row, _ in batch:
                        await copy.write_row(row)
            except Exception as error:  # noqa: BLE001 (every waiting request gets the error)
                for _, done in batch:
                    if not done.done():
                        done.set_exception(error)
                if self.connection.broken:
                    self.connection = await self.connect()
                continue
            for _, done in batch:
                if not done.done():  # not when the client went away meanwhile
                    done.set_result(None)


_writer: list[GroupCommit] = []  # the process's one writer, made at lifespan startup
_EMPTY = [(b"content-length", b"0")]


async def _answer(send: Send, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _EMPTY})
    await send({"type": "http.response.body", "body": b""})


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def application(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                writer = GroupCommit(os.environ["DATABASE_URL"])
                await writer.start()
                _writer.append(writer)
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] == "/healthz":
        await _answer(send, 200)
        return
    if scope["path"] != "/v2/track" or scope["method"] != "POST":
        await _answer(send, 404)
        return
    received_at = datetime.now(UTC)
    raw = await _body(receive)
    authorization = next((v for k, v in scope["headers"] if k == b"authorization"), None)
    try:
        json.loads(raw)
    except ValueError:
        await _answer(send, 400)
        return
    if authorization is None:
        await _answer(send, 401)
        return
    key_digest = hashlib.sha256(authorization).hexdigest()  # a digest, as the door stores
    try:
        await _writer[0].store((received_at, key_digest, raw.decode()))
    except Exception:  # noqa: BLE001 (not stored: the client should retry)
        await _answer(send, 503)
        return
    await _answer(send, 202)
