"""The durable acceptance store behind the ingestion door: a 202 is sent only after this commits.

The door writes through `store_accepted_batch`: its group-commit writer with the requests of many
calls gathered into one write (the in-process test client with the requests of one call). On
every database the requests of one write that share an ingestion key become one row (see
AcceptedRequest): under load a write carries dozens of requests from a few busy senders, and the
worker's cost per row is then paid once for all of them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Sum

from config.api_errors import service_unavailable
from ingestion.acceptance import Accepted, RequestError, messages_json
from ingestion.backends import ingestion_backend
from ingestion.models import AcceptedRequest
from ingestion.pg_copy import copy_rows
from ingestion.wakeups import wake_up_claim, wake_up_withdrawn

logger = logging.getLogger(__name__)

_BACKLOG_CHECK_SECONDS = 1.0
_backlog_cache: dict[str, float] = {"checked_at": float("-inf"), "size": 0.0}

# One stored request: when it was received and what the acceptance rules made of it.
Entry = tuple[datetime, Accepted]


def _unavailable(message: str) -> RequestError:
    return service_unavailable(message)


def backlog_refresh() -> int:
    """Count the accepted requests not yet applied (applied ones are deleted) now."""
    total = AcceptedRequest.objects.aggregate(requests=Sum("request_count"))["requests"]
    _backlog_cache["size"] = total or 0
    _backlog_cache["checked_at"] = time.monotonic()
    return int(_backlog_cache["size"])


def backlog_size(*, max_age: float = _BACKLOG_CHECK_SECONDS) -> int:
    """The backlog, counted again when the last count is older than `max_age` seconds (the ASGI
    door counts every second off its write path and passes a longer age as a fallback)."""
    if time.monotonic() - _backlog_cache["checked_at"] >= max_age:
        return backlog_refresh()
    return int(_backlog_cache["size"])


def kick_worker() -> None:
    """Ask a worker to drain now, unless a request to do so is already waiting for one
    (ingestion.wakeups). Losing this message loses nothing: the sweep drains too.

    Called after the requests it is for are committed; the task carries the time it was queued
    (this machine's clock), so a worker that has since drained the store skips it without a
    query (see ingestion.tasks.drain_accepted_requests).
    """
    from ingestion.tasks import drain_accepted_requests

    if not wake_up_claim():
        return  # one is queued and not yet taken: its drain will claim these requests
    try:
        drain_accepted_requests.apply_async(kwargs={"queued_at": time.time()}, retry=False)
    except Exception:  # the broker being down must not fail a request that is already stored
        wake_up_withdrawn()
        logger.warning("could not reach the broker; the periodic sweep will apply the backlog")


SEVERAL_ENDPOINTS = "several"


class StoredRow(NamedTuple):
    """One AcceptedRequest row, in the order of its columns (see the model for what each holds)."""

    received_at: datetime
    endpoint: str
    key_digest: str
    messages: list[dict]
    request_count: int
    requests: list[list] | None


def _unix_micros(moment: datetime) -> int:
    return round(moment.timestamp() * 1_000_000)


# A row takes no more requests once it holds this many messages (a full Segment batch): a row is
# claimed whole, so a drain's batch stays near INGESTION_DRAIN_BATCH, and PostgreSQL's limit on
# one jsonb value stays far away.
ROW_MESSAGES = 2_500


def _grouped_rows(entries: Sequence[Entry]) -> list[StoredRow]:
    """The rows a write stores: one per ingestion key (another once a row holds ROW_MESSAGES
    messages), in the order the rows were begun; a key's requests keep their order, so its
    messages are applied in the order they were accepted."""
    groups: list[list[Entry]] = []
    open_group: dict[str, tuple[list[Entry], int]] = {}  # per key: its last group, its messages
    for entry in entries:
        key_digest, count = entry[1].key_digest, len(entry[1].messages)
        group, held = open_group.get(key_digest, (None, 0))
        if group is None or held + count > ROW_MESSAGES:
            group, held = [], 0
            groups.append(group)
        group.append(entry)
        open_group[key_digest] = (group, held + count)
    rows = []
    for group in groups:
        key_digest = group[0][1].key_digest
        if len(group) == 1:
            received_at, accepted = group[0]
            rows.append(
                StoredRow(received_at, accepted.endpoint, key_digest, accepted.messages, 1, None)
            )
            continue
        endpoints = {accepted.endpoint for _, accepted in group}
        rows.append(
            StoredRow(
                max(received_at for received_at, _ in group),
                endpoints.pop() if len(endpoints) == 1 else SEVERAL_ENDPOINTS,
                key_digest,
                [message for _, accepted in group for message in accepted.messages],
                len(group),
                [
                    [accepted.endpoint, _unix_micros(received_at), len(accepted.messages)]
                    for received_at, accepted in group
                ],
            )
        )
    return rows


# A StoredRow as COPY writes it, its JSON columns (messages, requests) as text.
CopyRow = tuple[datetime, str, str, str, int, str | None]


def copy_values(rows: list[StoredRow]) -> list[CopyRow]:
    """The rows as COPY writes them, in the order of StoredRow's fields (the columns): the JSON
    columns as text."""
    return [
        (
            row.received_at,
            row.endpoint,
            row.key_digest,
            messages_json(row.messages),
            row.request_count,
            None if row.requests is None else messages_json(row.requests),
        )
        for row in rows
    ]


def copy_stored_rows(rows: list[StoredRow]) -> None:
    """PostgreSQL: every row in one COPY, the cheapest write per row there is."""
    copy_rows(AcceptedRequest, StoredRow._fields, copy_values(rows))


def accepted_copy_rows(entries: Sequence[Entry]) -> list[CopyRow]:
    """What one write of these requests COPYs (see _grouped_rows), for a writer that copies
    them itself (the door's group-commit writer on PostgreSQL)."""
    return copy_values(_grouped_rows(entries))


def backlog_full_check(*, max_age: float = _BACKLOG_CHECK_SECONDS) -> None:
    """Raise a 503 `RequestError` while the backlog is at INGESTION_BACKLOG_LIMIT."""
    if backlog_size(max_age=max_age) >= settings.INGESTION_BACKLOG_LIMIT:
        raise _unavailable("The service is catching up on a backlog; retry shortly.")


def backlog_count_age() -> float:
    """Seconds since the backlog was last counted."""
    return time.monotonic() - _backlog_cache["checked_at"]


def store_failed(exc: DatabaseError) -> RequestError:
    """The 503 of a write the database did not take, logged."""
    logger.error("acceptance store unavailable: %s", exc)
    return _unavailable("The service cannot store requests right now; retry shortly.")


def insert_stored_rows(rows: list[StoredRow]) -> None:
    AcceptedRequest.objects.bulk_create([AcceptedRequest(**row._asdict()) for row in rows])


def store_accepted_batch(
    entries: Sequence[Entry], *, kick: bool = True, backlog_max_age: float = _BACKLOG_CHECK_SECONDS
) -> None:
    """Store accepted requests in one write and one commit; raise a 503 `RequestError` when that
    cannot be made durable (database unreachable, backlog over INGESTION_BACKLOG_LIMIT).

    `kick=False` leaves waking a worker to the caller (the group-commit writer rate-limits it);
    `backlog_max_age`: how old the backlog count checked against the limit may be.
    """
    if not entries:
        return
    try:
        backlog_full_check(max_age=backlog_max_age)
        backend = ingestion_backend()
        if backend.copy_commits_alone and connection.get_autocommit():
            # Outside any transaction one COPY is a transaction of its own, committed (and
            # flushed to the WAL) before it returns: the same durability without the round trips
            # of BEGIN and COMMIT.
            backend.accepted_rows_write(_grouped_rows(entries))
            if kick:
                kick_worker()
            return
        with transaction.atomic():
            backend.accepted_rows_write(_grouped_rows(entries))
            if kick:
                transaction.on_commit(kick_worker)
    except DatabaseError as exc:
        raise store_failed(exc) from exc


def store_accepted(accepted_requests: list[Accepted], *, received_at: datetime) -> None:
    """Store the requests of one call (see `store_accepted_batch`)."""
    store_accepted_batch([(received_at, accepted) for accepted in accepted_requests])
