"""When the ASGI door's group-commit writer writes: it gathers requests until as many wait as its
last write carried (at least two), or until its window has passed, whichever comes first.

These tests assert which requests are written together. A window of an hour shows a write that
went because its group was complete (the test would otherwise not finish); bench/bench_writer.py
measures how long the requests wait."""

import asyncio
from datetime import UTC, datetime

import pytest

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
    write = GroupCommitWriter._write

    async def counted(writer, loop, entries):
        made.append([accepted.messages[0]["userId"] for _, accepted in entries])
        return await write(writer, loop, entries)

    monkeypatch.setattr(GroupCommitWriter, "_write", counted)
    return made


# A window no test waits out: a write under it goes only because its group is complete.
HOUR = 3600
# Longer than any of these tests takes, far shorter than HOUR: a writer that waited out its
# window fails the test instead of hanging it.
GIVE_UP_SECONDS = 60


async def _store_at(writer: GroupCommitWriter, user_id: str, delay: float) -> None:
    """Store one request after `delay` seconds."""
    await asyncio.sleep(delay)
    await writer.store(_identify(user_id))


def _run(writer: GroupCommitWriter, *phases) -> None:
    """Run each phase (a list of (user, delay) stored at once) after the previous one's
    requests are stored, then close the writer."""

    async def scenario():
        try:
            for phase in phases:
                await asyncio.gather(*(_store_at(writer, user, delay) for user, delay in phase))
        finally:
            await writer.close()

    asyncio.run(asyncio.wait_for(scenario(), GIVE_UP_SECONDS))


def test_a_write_goes_once_the_last_writes_clients_are_back(transactional_db, writes):
    """Ann, Bo and Cy are written together. When they come back one after another, the writer
    does not wait out its window: the third arrival completes the group."""
    writer = GroupCommitWriter(gather_seconds=HOUR)

    _run(
        writer,
        [("ann", 0), ("bo", 0), ("cy", 0)],
        [("ann", 0), ("bo", 0.05), ("cy", 0.1)],
    )

    assert writes == [["ann", "bo", "cy"], ["ann", "bo", "cy"]]
    assert stored_requests() == 6
    assert AcceptedRequest.objects.count() == 2  # a row per write: the requests share a key


def test_fewer_than_the_last_write_wait_out_the_window(transactional_db, writes):
    """After a write of three, two arrivals are not a full group: they go together when the
    window, measured from the first of them, has passed."""
    writer = GroupCommitWriter(gather_seconds=0.3)

    _run(writer, [("ann", 0), ("bo", 0), ("cy", 0)], [("di", 0), ("ed", 0.1)])

    assert writes == [["ann", "bo", "cy"], ["di", "ed"]]
    assert stored_requests() == 5


def test_a_lone_request_waits_for_company(transactional_db, writes):
    """Under a light load a request alone waits, and a second one lets both go at once: writing
    each alone would cost a commit apiece."""
    writer = GroupCommitWriter(gather_seconds=HOUR)

    _run(writer, [("ann", 0), ("bo", 0.1)])

    assert writes == [["ann", "bo"]]
    assert stored_requests() == 2


def test_a_lone_request_goes_alone_once_the_window_has_passed(transactional_db, writes):
    writer = GroupCommitWriter(gather_seconds=0.3)

    _run(writer, [("ann", 0)], [("bo", 0)])

    assert writes == [["ann"], ["bo"]]
    assert stored_requests() == 2
