"""Draining the queue: one transaction claims accepted requests, applies them, records what it
drops and deletes them; a worker runs such drains in a loop for a while, on PostgreSQL on up to
INGESTION_DRAIN_CONNECTIONS connections at once while a backlog lasts."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction

from ingestion import metrics
from ingestion.backends import ingestion_backend
from ingestion.models import DroppedRequest, IngestionKey
from ingestion.services.apply import DrainApply, requests_apply
from ingestion.services.drops import drops_record, key_drop, marker_drops
from ingestion.services.queue import (
    ClaimedBatch,
    ClaimedRequest,
    claimed_delete,
    requests_claim,
)


@dataclass(frozen=True, slots=True)
class DrainResult:
    requests: int
    dropped: int
    # Whether this drain stopped at its limit, so more may be waiting.
    more: bool = False


def accepted_requests_drain(
    *, limit: int, on_backlog: Callable[[], None] | None = None
) -> DrainResult:
    """Claim accepted requests holding up to `limit` messages, apply them, and delete them, in
    one transaction; `on_backlog` is called once the claim has found more waiting.

    Claimed rows are locked (SKIP LOCKED on PostgreSQL), so any number of workers can drain at
    once; a worker that dies mid-way leaves its rows unclaimed for the next drain. A product's
    calls that link users are applied before the requests accepted after them (see queue).
    """
    started = time.perf_counter()
    with transaction.atomic():
        _commit_without_waiting_for_disk()
        batch = requests_claim(limit=limit)
        if not batch.request_count:
            return DrainResult(0, 0)
        if batch.more and on_backlog is not None:
            on_backlog()
        drops, work = _drops_and_work_by_product(batch)
        run = DrainApply(lambda: ingestion_backend().earlier_drains_wait(batch))
        for product_id, product_work in sorted(work.items()):
            if product_work.whole_keys:
                under_keys = batch.under_keys(product_work.whole_keys)
                drops.extend(requests_apply(product_id, [], run, under_keys=under_keys))
            else:
                drops.extend(requests_apply(product_id, product_work.requests, run))
        if drops:
            drops_record(drops)
        _accepted_tally(batch)
        claimed_delete(batch)
    metrics.drain_batch_observe(
        seconds=time.perf_counter() - started,
        messages=batch.message_count,
        dropped=((drop.reason, drop.message_count) for drop in drops),
    )
    return DrainResult(batch.request_count, len(drops), batch.more)


def accepted_requests_drain_for(*, seconds: float, batch: int) -> tuple[DrainResult, bool]:
    """Drain batches until the store is empty or `seconds` pass; say whether work is left.

    Once a claim finds a backlog, other connections drain beside this one where the backend
    allows it (INGESTION_DRAIN_CONNECTIONS in all), each batch its own transaction as here:
    PostgreSQL runs a statement on one core, and a drain's claim, staging and messageIds (about
    half its work) need not wait for the drain before it to commit (DrainApply.turn). Not
    inside a caller's transaction: other connections would not see what it holds uncommitted
    (a test's rows)."""
    deadline = time.monotonic() + seconds
    beside = _DrainsBeside(deadline, batch, _connections_beside())
    try:
        results = [_drain_until(deadline, batch, beside.start), *beside.results()]
    finally:
        beside.close()
    total = DrainResult(
        sum(result.requests for result, _ in results), sum(result.dropped for result, _ in results)
    )
    return total, any(more for _, more in results)


def _connections_beside() -> int:
    if not ingestion_backend().drains_beside or connection.in_atomic_block:
        return 0
    return settings.INGESTION_DRAIN_CONNECTIONS - 1


def _drain_until(
    deadline: float, batch: int, on_backlog: Callable[[], None] | None = None
) -> tuple[DrainResult, bool]:
    """Drain batches on this thread's connection until none is left or the deadline passes."""
    requests = dropped = 0
    while True:
        result = accepted_requests_drain(limit=batch, on_backlog=on_backlog)
        requests += result.requests
        dropped += result.dropped
        if not result.more:
            return DrainResult(requests, dropped), False
        if time.monotonic() >= deadline:
            return DrainResult(requests, dropped), True


class _DrainsBeside:
    """Drains on `count` other connections (threads of a pool), started by the first claim that
    finds a backlog; each connection is closed (or given back to the pool) when it is done."""

    def __init__(self, deadline: float, batch: int, count: int) -> None:
        self._deadline, self._batch, self._count = deadline, batch, count
        self._pool = ThreadPoolExecutor(count, "drain-beside") if count else None
        self._running: list[Future[tuple[DrainResult, bool]]] = []

    def start(self) -> None:
        if self._pool is not None and not self._running:
            self._running = [self._pool.submit(self._drain) for _ in range(self._count)]

    def _drain(self) -> tuple[DrainResult, bool]:
        try:
            return _drain_until(self._deadline, self._batch)
        finally:
            connection.close()

    def results(self) -> list[tuple[DrainResult, bool]]:
        return [running.result() for running in self._running]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


@dataclass(frozen=True, slots=True)
class _ProductWork:
    """What a drain applies for one product: these requests, or every claimed row under these
    keys."""

    requests: list[ClaimedRequest]
    whole_keys: tuple[str, ...]


def _drops_and_work_by_product(
    batch: ClaimedBatch,
) -> tuple[list[DroppedRequest], dict[int, _ProductWork]]:
    """Look up the claimed requests' ingestion keys and sort the claim into drops (unknown or
    revoked keys, items the acceptance rules left out) and, per product, what to apply.

    A key valid for every row it has in the claim (the common case) stays whole: the backend
    applies its rows together (on PostgreSQL where they are stored). The rows of any other key
    are judged one by one."""
    keys = {key.digest: key for key in IngestionKey.objects.filter(digest__in=set(batch.keys))}
    drops: list[DroppedRequest] = []
    whole_keys: dict[int, list[str]] = defaultdict(list)
    one_by_one: list[str] = []  # keys some or all of whose rows are dropped
    with_markers: list[str] = []
    for digest, claimed in batch.keys.items():
        key = keys.get(digest)
        if key is None or (
            key.revoked_at is not None and key.revoked_at <= claimed.latest_received_at
        ):
            one_by_one.append(digest)
            continue
        whole_keys[key.product_id].append(digest)
        if claimed.has_drop_markers:
            with_markers.append(digest)
    if with_markers:
        for request in batch.requests_under(with_markers, only_with_drop_markers=True):
            drops.extend(marker_drops(request, keys[request.key_digest].product_id))
    requests = batch.requests_under(one_by_one) if one_by_one else []
    by_product: dict[int, list[ClaimedRequest]] = defaultdict(list)
    for request in requests:
        key = keys.get(request.key_digest)
        drop = key_drop(request, key)
        if drop is not None:
            drops.append(drop)
        else:
            assert key is not None  # key_drop drops a request whose key is unknown
            drops.extend(marker_drops(request, key.product_id))
            by_product[key.product_id].append(request)
    work: dict[int, _ProductWork] = {}
    for product_id in by_product.keys() | whole_keys.keys():
        product_requests = by_product.get(product_id, [])
        product_keys = whole_keys.get(product_id, [])
        if product_requests and product_keys:
            # Both for one product (a key revoked within this claim, another valid): all of its
            # requests one by one, in the order they were accepted.
            product_requests = sorted(
                product_requests + batch.requests_under(product_keys),
                key=lambda request: request.accepted_order,
            )
            product_keys = []
        work[product_id] = _ProductWork(product_requests, tuple(product_keys))
    return drops, work


def _accepted_tally(batch: ClaimedBatch) -> None:
    """Count the claim's requests per key and minute (what the dashboard's health page shows)."""
    ingestion_backend().accepted_tally(batch)


def _commit_without_waiting_for_disk() -> None:
    """On PostgreSQL, let this drain's commit return before its WAL reaches disk.

    Safe here, unlike at the front door: the drain applies and deletes its accepted rows in one
    transaction. If the database server crashes before that commit is on disk, the whole
    transaction is gone together: the rows are back in the store, their messageIds unclaimed,
    and the next drain applies them once. Readers may briefly have seen the lost effects. What
    it saves is a WAL flush per batch that the worker would otherwise sit out.
    """
    ingestion_backend().drain_commit_relaxed()
