"""When the ASGI door's group-commit writer writes: it gathers requests until as many wait as its
last write carried (at least two), or until its window has passed, whichever comes first."""

import asyncio
import time
from datetime import UTC, datetime

import pytest

from ingestion import writer as writer_module
from ingestion.acceptance import Accepted
from ingestion.models import AcceptedRequest
from ingestion.writer import GroupCommitWriter


def stored_requests() -> int:
    return sum(AcceptedRequest.objects.values_list("request_count", flat=True))


def _identify(user_id: str) -> list:
    message = {"type": "identify", "timestamp": 1793527200000, "userId": user_id}
    now = datetime.now(UTC)
    return [(now, Accepted(endpoint="v2/identify", key_digest="d" * 64, messages=[message]))]


@pytest.fixture
def writes(monkeypatch) -> list[list[str]]:
    """The users of each write the writer makes, in order."""
    made: list[list[str]] = []
    store = writer_module.store_accepted_batch

    def counted(entries, **kwargs):
        made.append([accepted.messages[0]["userId"] for _, accepted in entries])
        return store(entries, **kwargs)

    monkeypatch.setattr(writer_module, "store_accepted_batch", counted)
    return made


async def _store_at(writer: GroupCommitWriter, user_id: str, delay: float) -> float:
    """Store one request after `delay` seconds; return how long it waited for its 202."""
    await asyncio.sleep(delay)
    started = time.monotonic()
    await writer.store(_identify(user_id))
    return time.monotonic() - started


def test_a_write_goes_once_the_last_writes_clients_are_back(transactional_db, writes):
    """Ann, Bo and Cy are written together. When they come back one after another, the writer
    does not wait out its (here 5-second) window: the third arrival completes the group."""
    writer = GroupCommitWriter(gather_seconds=5)

    async def scenario():
        try:
            await asyncio.gather(*(_store_at(writer, u, 0) for u in ("ann", "bo", "cy")))
            return await asyncio.gather(
                _store_at(writer, "ann", 0),
                _store_at(writer, "bo", 0.05),
                _store_at(writer, "cy", 0.1),
            )
        finally:
            await writer.close()

    waited = asyncio.run(scenario())
    assert writes == [["ann", "bo", "cy"], ["ann", "bo", "cy"]]
    assert max(waited) < 2
    assert stored_requests() == 6
    assert AcceptedRequest.objects.count() == 2  # a row per write: the requests share a key


def test_fewer_than_the_last_write_wait_out_the_window(transactional_db, writes):
    """After a write of three, two arrivals are not a full group: they go together when the
    window, measured from the first of them, has passed."""
    writer = GroupCommitWriter(gather_seconds=0.3)

    async def scenario():
        try:
            await asyncio.gather(*(_store_at(writer, u, 0) for u in ("ann", "bo", "cy")))
            return await asyncio.gather(_store_at(writer, "di", 0), _store_at(writer, "ed", 0.1))
        finally:
            await writer.close()

    di_waited, ed_waited = asyncio.run(scenario())
    assert writes == [["ann", "bo", "cy"], ["di", "ed"]]
    assert di_waited >= 0.25
    assert stored_requests() == 5


def test_a_lone_request_waits_out_the_window_for_company(transactional_db, writes):
    """Under a light load a request alone waits out the window, and a second one within it lets
    both go at once: writing each alone would cost a commit apiece."""
    writer = GroupCommitWriter(gather_seconds=0.3)

    async def scenario():
        try:
            ann_waited = await _store_at(writer, "ann", 0)
            bo_waited, _ = await asyncio.gather(
                _store_at(writer, "bo", 0), _store_at(writer, "cy", 0.1)
            )
            return ann_waited, bo_waited
        finally:
            await writer.close()

    ann_waited, bo_waited = asyncio.run(scenario())
    assert writes == [["ann"], ["bo", "cy"]]
    assert ann_waited >= 0.25
    assert bo_waited < 0.25
