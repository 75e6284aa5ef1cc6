"""When the door's group-commit writer wakes a worker: after a write commits, at most once per
interval (writes in between are covered by one wake-up at the interval's end), at most once a
second while the backlog last counted holds a drain's batch (a drain under way then carries on
by itself), and a wake-up still due when the writer closes is sent then, not dropped."""

import asyncio
import time
from datetime import UTC, datetime

import pytest

from ingestion import writer as writer_module
from ingestion.acceptance import Accepted
from ingestion.writer import GroupCommitWriter

# Longer than any of these tests takes: a wake-up due after it is sent only when the writer closes.
HOUR = 3600


@pytest.fixture
def kicks(monkeypatch) -> list[float]:
    """When (time.monotonic) the writer woke a worker, instead of reaching a broker."""
    sent: list[float] = []
    monkeypatch.setattr(writer_module, "kick_worker", lambda: sent.append(time.monotonic()))
    return sent


def _identify(user_id: str) -> list:
    message = {"type": "identify", "timestamp": 1793527200000, "userId": user_id}
    return [(datetime.now(UTC), Accepted("v2/identify", "d" * 64, [message]))]


def _store_one_after_another(writer: GroupCommitWriter, *, pause: float, then: float) -> float:
    """Three requests, each `pause` seconds after the previous one's answer, then `then`
    seconds of quiet; the writer is closed after that. Returns when the quiet began."""

    async def scenario() -> float:
        try:
            for user_id in ("usr_ann", "usr_bo", "usr_cy"):
                await writer.store(_identify(user_id))
                await asyncio.sleep(pause)
            quiet_from = time.monotonic()
            await asyncio.sleep(then)
            return quiet_from
        finally:
            await writer.close()

    return asyncio.run(asyncio.wait_for(scenario(), 60))


def test_writes_within_an_interval_share_one_wake_up_at_its_end(transactional_db, kicks):
    writer = GroupCommitWriter(gather_seconds=0.001, kick_interval_seconds=0.3)

    _store_one_after_another(writer, pause=0.05, then=0.5)

    # The first write's at once; the next two writes' together, once the interval had passed.
    assert len(kicks) == 2
    assert kicks[1] - kicks[0] >= 0.29


def test_the_interval_is_ingestion_wake_up_ms_unless_given(transactional_db, kicks, settings):
    settings.INGESTION_WAKE_UP_MS = 300
    writer = GroupCommitWriter(gather_seconds=0.001)

    _store_one_after_another(writer, pause=0.05, then=0.5)

    # As with 300 ms given: the first write's at once, the next two's together at its end.
    assert len(kicks) == 2
    assert kicks[1] - kicks[0] >= 0.29


def test_a_backlog_of_a_drains_batch_spaces_wake_ups_a_second_apart(
    transactional_db, kicks, monkeypatch, settings
):
    settings.INGESTION_DRAIN_BATCH = 1000
    monkeypatch.setattr(writer_module, "backlog_size", lambda **_: 1000)  # as last counted
    writer = GroupCommitWriter(gather_seconds=0.001, kick_interval_seconds=0.05)

    quiet_from = _store_one_after_another(writer, pause=0.1, then=0.3)

    # The first write's at once; the others' not within the second after it: sent at close.
    assert len(kicks) == 2
    assert kicks[1] >= quiet_from + 0.3


def test_a_wake_up_due_when_the_writer_closes_is_sent(transactional_db, kicks):
    writer = GroupCommitWriter(gather_seconds=0.001, kick_interval_seconds=HOUR)

    quiet_from = _store_one_after_another(writer, pause=0, then=0)

    assert len(kicks) == 2
    assert kicks[1] >= quiet_from
