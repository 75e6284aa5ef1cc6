"""Group commit for the ingestion door: many requests, one write, one commit, then every 202.

A request hands its accepted entries to the writer and waits. The writer gathers what arrives
while the previous write is still running, or, when it was idle, until as many requests wait as
its last write carried (at least two) or a short window (1 ms) has passed, and stores it all with
one COPY, one commit: on PostgreSQL on an async connection of the event loop itself (no hand-off
to a thread and back per write: the door answered 10-15% more requests a second so), elsewhere
with `store_accepted_batch` in a thread of its own. Only when that commit
returns does each waiting request get its answer, so a 202 is as durable as one commit per
request would make it, while the commit cost is shared by every request in the batch. A commit
that does not come back within WRITE_DEADLINE_SECONDS is answered 503 and given up.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
)

from config.api_errors import service_unavailable
from ingestion.acceptance import RequestError
from ingestion.backends import ingestion_backend
from ingestion.store import (
    Entry,
    accepted_copy_rows,
    backlog_count_age,
    backlog_full_check,
    backlog_refresh,
    backlog_size,
    kick_worker,
    store_accepted_batch,
    store_failed,
)

if TYPE_CHECKING:
    import psycopg

    from ingestion.pg_copy import EventLoopCopy

logger = logging.getLogger(__name__)

# A request waiting in the writer: its entries, the future its answer waits on, and the
# deadline (the event loop's clock) by which it is answered 503 if not committed.
Waiting = tuple[Sequence[Entry], "asyncio.Future[None]", float]

GATHER_SECONDS = 0.001
# The fewest waiting requests that let a write go before the window ends (see _gather).
MIN_GROUP = 2
MAX_BATCH_ENTRIES = 2000
# While the backlog last counted holds at least a drain's batch (INGESTION_DRAIN_BATCH), a drain
# under way claims full batches and carries on by itself until less than that is left (or no
# worker runs at all): another wake-up only queues a task behind it, at a millisecond of the
# door's CPU each (Celery's publish). Then a worker is woken at most this often, so one that
# comes back still finds the backlog within a second; once the count is below a batch again
# (it is taken every BACKLOG_COUNT_SECONDS), the interval above is back.
BUSY_KICK_INTERVAL_SECONDS = 1.0
# How often the backlog is counted for the INGESTION_BACKLOG_LIMIT check. Counting a large store
# takes a while, so it runs on a thread and connection of its own, never on the write path.
BACKLOG_COUNT_SECONDS = 1.0
# Should that thread fall behind (or not have run yet), the write path counts for itself.
BACKLOG_STALE_SECONDS = 5.0
# The longest a request waits for its commit before it is answered 503 (a write none of whose
# requests waits any more is given up, with its connection): far above a commit's usual
# milliseconds, below the 10-15 s an SDK waits for an answer. It bounds what nothing else does:
# a commit waiting for a synchronous standby that is gone (the old primary of a failover, which
# no standby confirms any more), a host that vanished before TCP tells (docs/deployment.md).
WRITE_DEADLINE_SECONDS = 5.0


# The writer thread keeps its database connection from one batch to the next: handing it back
# to the pool after every batch made the next batch pay the pool's health-check round trip.
# After a pause (the database may have restarted meanwhile) the connection is checked again.
IDLE_CHECK_SECONDS = 1.0
_writer_state = threading.local()


def _write(entries: Sequence[Entry]) -> None:
    """Runs in the writer thread, which keeps one database connection of its own."""
    last_write = getattr(_writer_state, "last_write", float("-inf"))
    if time.monotonic() - last_write > IDLE_CHECK_SECONDS:
        close_old_connections()  # back to the pool, checked when taken again
    try:
        store_accepted_batch(entries, kick=False, backlog_max_age=BACKLOG_STALE_SECONDS)
    except RequestError:
        connection.close()  # reconnect on the next batch rather than reuse a failed connection
        raise
    finally:
        _writer_state.last_write = time.monotonic()


def _close_connection() -> None:
    connection.close()  # looked up here: Django's connections belong to the thread that made them


def _count_backlog() -> None:
    close_old_connections()
    try:
        backlog_refresh()
    except Exception:  # the database is down: the write path answers 503 on its own
        logger.warning("could not count the ingestion backlog", exc_info=True)
        connection.close()


class GroupCommitWriter:
    """One per process, used from the event loop of that process.

    A request costs the writer a future and a place in the queue, no more: the deadlines of all
    waiting requests are kept by one timer (`_expire`), set for the oldest of them, rather than
    a timer, a timeout scope and a shielded future per request (together about as much as the
    rest of the request's way through the door)."""

    def __init__(
        self,
        *,
        gather_seconds: float = GATHER_SECONDS,
        max_batch_entries: int = MAX_BATCH_ENTRIES,
        kick_interval_seconds: float | None = None,
        write_deadline_seconds: float = WRITE_DEADLINE_SECONDS,
    ) -> None:
        self.gather_seconds = gather_seconds
        self.write_deadline_seconds = write_deadline_seconds
        # Writes given up at their deadline, still ending (closed once they have).
        self._abandoned: set[asyncio.Task] = set()
        self.max_batch_entries = max_batch_entries
        # A worker is woken at most this often per web process (INGESTION_WAKE_UP_MS); a
        # wake-up asked for in between is sent at the end of the interval, so no batch waits
        # for the periodic sweep.
        self.kick_interval_seconds = (
            settings.INGESTION_WAKE_UP_MS / 1000
            if kick_interval_seconds is None
            else kick_interval_seconds
        )
        # Requests waiting to be written, oldest first, so also in the order of their deadlines.
        self._pending: deque[Waiting] = deque()
        # The requests taken off `_pending` for the write under way (or written one by one).
        self._held: list[Waiting] = []
        # The write under way on the event loop: the answers it is for, its task, and the
        # future `_run` waits on (settled when the write ends, or when `_expire` gives it up).
        self._in_flight: tuple[list[Waiting], asyncio.Task, asyncio.Future[None]] | None = None
        # The one deadline timer: due at the earliest deadline of a request still waiting.
        self._watchdog: asyncio.TimerHandle | None = None
        self._closing = False
        self._pending_since = 0.0
        # Set while `_run` waits for a first request (`_idle`) or for a full group (`_gathered`).
        self._idle: asyncio.Future[None] | None = None
        self._gathered: asyncio.Future[None] | None = None
        self._task: asyncio.Task | None = None
        self._db_thread = ThreadPoolExecutor(1, thread_name_prefix="eds-group-commit")
        self._kick_thread = ThreadPoolExecutor(1, thread_name_prefix="eds-kick")
        self._count_thread = ThreadPoolExecutor(1, thread_name_prefix="eds-backlog")
        self._counter: asyncio.Task | None = None
        self._last_kick = float("-inf")
        self._kick_timer: asyncio.TimerHandle | None = None
        self._kick_sent: asyncio.Future | None = None
        # How many waiting requests let a write go before its window ends: as many as the last
        # write carried, at least two; `_gathered` is settled once that many wait.
        self._group = MIN_GROUP
        # PostgreSQL's COPY on the event loop, chosen at the first write; None: the thread.
        self._loop_copy: EventLoopCopy | None = None
        self._last_write = float("-inf")

    async def store(self, entries: Sequence[Entry]) -> None:
        """Return once `entries` are committed; raise a 503 `RequestError` if they cannot be
        (within `write_deadline_seconds`: see `_expire`)."""
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done():
            self._start(loop)
        done = loop.create_future()
        now = loop.time()
        pending = self._pending
        if not pending:
            self._pending_since = now
        pending.append((entries, done, now + self.write_deadline_seconds))
        if self._watchdog is None:
            self._watchdog = loop.call_at(now + self.write_deadline_seconds, self._expire, loop)
        if self._idle is not None:
            _settled(self._idle)
            self._idle = None
        if self._gathered is not None and len(pending) >= self._group:
            _settled(self._gathered)  # unless the window's end settled it already
            self._gathered = None
        await done

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._loop_copy is None:
            self._loop_copy = ingestion_backend().event_loop_writer()
        self._idle = self._gathered = None
        if self._counter is None:
            self._counter = loop.create_task(self._count_every_second(loop), name="eds-backlog")
        self._task = loop.create_task(self._run(), name="eds-group-commit")

    async def _count_every_second(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            await loop.run_in_executor(self._count_thread, _count_backlog)
            await asyncio.sleep(BACKLOG_COUNT_SECONDS)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._pending:
                if self._closing:
                    return
                idle = self._idle = loop.create_future()
                await idle
                continue
            await self._gather(loop)
            batch = self._take_batch(loop)
            if not batch:
                continue  # every one of them was answered 503 at its deadline
            self._group = max(len(batch), MIN_GROUP)
            entries = [entry for waiting in batch for entry in waiting[0]]
            self._held = batch
            try:
                await self._write_in_time(loop, entries, batch)
            except RequestError as error:
                if len(batch) > 1 and _refused_by_the_data(error):
                    await self._write_one_by_one(loop, batch)
                else:
                    self._settle(batch, error)
            except Exception:
                # The cause is in the log; the clients get the one retryable answer.
                logger.exception("group commit failed")
                self._settle(batch, _write_failed())
            else:
                self._settle(batch, None)
                self._ask_for_kick(loop)
            finally:
                self._held = []

    async def _write(self, loop: asyncio.AbstractEventLoop, entries: Sequence[Entry]) -> None:
        """Store one write's entries (one COPY, one commit), or raise a 503 `RequestError`: on
        the event loop where the database allows (the rules are store.py's, as on the thread),
        else on the writer thread."""
        if self._loop_copy is None:
            await loop.run_in_executor(self._db_thread, _write, entries)
            return
        if backlog_count_age() > BACKLOG_STALE_SECONDS:  # the counting thread fell behind
            await loop.run_in_executor(self._count_thread, _count_backlog)
        backlog_full_check(max_age=float("inf"))  # as counted: never a query on the loop
        try:
            if loop.time() - self._last_write > IDLE_CHECK_SECONDS:
                await self._loop_copy.check()
            await self._loop_copy.write(accepted_copy_rows(entries))
        except DatabaseError as exc:
            raise store_failed(exc) from exc
        finally:
            self._last_write = loop.time()

    async def _write_in_time(
        self, loop: asyncio.AbstractEventLoop, entries: Sequence[Entry], answers: list[Waiting]
    ) -> None:
        """`_write`, given up once every request it carries has had its 503 (`_expire`): the
        statement is cancelled, its connection left to end and be closed on its own, and the
        next write opens another, which a failover's new primary may answer. (The writer
        thread's write cannot be called off; its requests still get their 503 in time.)"""
        if self._loop_copy is None:
            await self._write(loop, entries)
            return
        write = loop.create_task(self._write(loop, entries), name="eds-group-commit-write")
        ended: asyncio.Future[None] = loop.create_future()
        write.add_done_callback(functools.partial(_settled, ended))
        self._in_flight = (answers, write, ended)
        try:
            await ended
        finally:
            self._in_flight = None
        if write.done():
            return write.result()
        raise _write_failed()  # given up by _expire

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """At the earliest deadline of a request still waiting: a 503 for each request whose
        deadline has passed, the write under way given up once none of its requests waits for
        it any more, and the timer set again for the next deadline."""
        self._watchdog = None
        now = loop.time()
        next_deadline: float | None = None
        for _, done, deadline in self._held:
            if done.done():
                continue
            if deadline <= now:
                # Not written yet: it never will be (skipped). Being written: it may still
                # commit, as when a connection breaks during a commit; a 503 promises nothing.
                _answer_late(done)
            elif next_deadline is None:
                next_deadline = deadline
        in_flight = self._in_flight
        if in_flight is not None and not in_flight[2].done():
            answers, write, ended = in_flight
            if all(done.done() for _, done, _ in answers):
                self._give_up(loop, write, ended)
        pending = self._pending
        while pending and (pending[0][1].done() or pending[0][2] <= now):
            _, done, _ = pending.popleft()  # _take_batch would skip it: answered already
            if not done.done():
                _answer_late(done)
        if next_deadline is None and pending:
            next_deadline = pending[0][2]
        if next_deadline is not None:
            self._watchdog = loop.call_at(next_deadline, self._expire, loop)

    def _give_up(
        self, loop: asyncio.AbstractEventLoop, write: asyncio.Task, ended: asyncio.Future[None]
    ) -> None:
        assert self._loop_copy is not None  # only writes on the event loop are given up
        given_up = self._loop_copy.abandon()
        write.cancel()  # psycopg asks the server to cancel the statement, for at most 10 s
        ending = loop.create_task(_close_when_ended(write, given_up), name="eds-given-up-write")
        self._abandoned.add(ending)
        ending.add_done_callback(self._abandoned.discard)
        logger.error("a write outlived its requests' deadline: given up")
        ended.set_result(None)

    async def _gather(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wait until as many requests wait as the last write carried (at least two), or out the
        rest of the window measured from the oldest waiting request, whichever comes first.
        Requests that queued up while the previous write ran go at once.

        The clients a write answers mostly send their next request at once (an SDK's queue,
        a busy service's keep-alive connections): once they are all back, waiting out the rest
        of the window only adds latency, and each client's next request waits behind it. A lone
        request still waits for company: writing each one alone costs a commit apiece."""
        delay = self._pending_since + self.gather_seconds - loop.time()
        if delay <= 0 or len(self._pending) >= self._group:
            return
        gathered = self._gathered = loop.create_future()
        window = loop.call_later(delay, _settled, gathered)
        try:
            await gathered
        finally:
            self._gathered = None
            window.cancel()

    async def _write_one_by_one(
        self, loop: asyncio.AbstractEventLoop, batch: list[Waiting]
    ) -> None:
        """One request the database refuses must not fail the others it was batched with."""
        stored = False
        for waiting in batch:
            if waiting[1].done():  # answered 503 at its deadline meanwhile
                continue
            try:
                await self._write_in_time(loop, waiting[0], [waiting])
            except RequestError as error:
                self._settle([waiting], error)
            else:
                self._settle([waiting], None)
                stored = True
        if stored:
            self._ask_for_kick(loop)

    def _take_batch(self, loop: asyncio.AbstractEventLoop) -> list[Waiting]:
        batch: list[Waiting] = []
        size = 0
        while self._pending and (
            not batch or size + len(self._pending[0][0]) <= self.max_batch_entries
        ):
            waiting = self._pending.popleft()
            if waiting[1].done():  # answered 503 at its deadline while it waited
                continue
            batch.append(waiting)
            size += len(waiting[0])
        self._pending_since = loop.time()
        return batch

    @staticmethod
    def _settle(batch: list[Waiting], error: Exception | None) -> None:
        for _, done, _ in batch:
            if done.done():  # answered 503 at its deadline, or the client went away
                continue
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

    def _ask_for_kick(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._kick_timer is not None:
            return
        interval = self.kick_interval_seconds
        if backlog_size(max_age=float("inf")) >= settings.INGESTION_DRAIN_BATCH:  # as counted
            interval = max(interval, BUSY_KICK_INTERVAL_SECONDS)
        wait = self._last_kick + interval - loop.time()
        if wait <= 0:
            self._kick(loop)
        else:
            self._kick_timer = loop.call_later(wait, self._kick, loop)

    def _kick(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._kick_sent is not None and not self._kick_sent.done():
            # The broker is slow or down: try again later rather than queue up wake-ups.
            self._kick_timer = loop.call_later(self.kick_interval_seconds, self._kick, loop)
            return
        self._kick_timer = None
        self._last_kick = loop.time()
        # Its own thread: a broker that is slow to answer must never hold up a commit.
        self._kick_sent = loop.run_in_executor(self._kick_thread, kick_worker)

    async def close(self) -> None:
        """Write what is waiting, then stop (on server shutdown)."""
        loop = asyncio.get_running_loop()
        self._closing = True
        if self._task is not None:
            if self._idle is not None:
                _settled(self._idle)
                self._idle = None
            await self._task  # returns once nothing waits and no write is in flight
            self._task = None
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self._kick_timer is not None:
            # A wake-up still due for requests committed since the last one: sent now.
            self._kick_timer.cancel()
            self._kick_timer = None
            self._kick_sent = loop.run_in_executor(self._kick_thread, kick_worker)
        if self._counter is not None:
            self._counter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._counter
            self._counter = None
            await loop.run_in_executor(self._count_thread, _close_connection)
        if self._abandoned:
            await asyncio.wait(self._abandoned)
        if self._loop_copy is not None:
            await self._loop_copy.close()
        await loop.run_in_executor(self._db_thread, _close_connection)
        for thread in (self._db_thread, self._kick_thread, self._count_thread):
            thread.shutdown(wait=True)


def _settled(future: asyncio.Future[None], *_: object) -> None:
    """Settle `future` unless it is already: by a window's end or a new request, whichever came
    first; by a write's end or its giving up; or cancelled with the task that awaited it."""
    if not future.done():
        future.set_result(None)


def _answer_late(done: asyncio.Future[None]) -> None:
    logger.error("an accepted request was not committed within its deadline")
    done.set_exception(_write_failed())


async def _close_when_ended(write: asyncio.Task, session: psycopg.AsyncConnection | None) -> None:
    await asyncio.wait({write})
    if not write.cancelled():
        write.exception()  # retrieved: it was answered (503) and logged already
    if session is not None:
        await session.close()


def _refused_by_the_data(error: RequestError) -> bool:
    """The write failed because of what one of the rows holds, not because the database is
    unreachable (then every request fails alike and retrying them one by one only adds load)."""
    cause = error.__cause__
    return isinstance(cause, DatabaseError) and not isinstance(
        cause, OperationalError | InterfaceError
    )


def _write_failed() -> RequestError:
    return service_unavailable("The service cannot store requests right now; retry shortly.")
