"""The door's group-commit writer answers within its deadline when the database does not: a
request whose commit does not come back in time gets its 503 (with nothing stored for it), and
the writer goes on with a new connection instead of waiting on the stuck one. What a commit
waiting for a synchronous standby that is gone looks like to the door; here the write waits for
a table lock another session holds, a wait the writer cannot tell apart from that one."""

import asyncio
import time
from datetime import UTC, datetime

import pytest

from ingestion.acceptance import Accepted, RequestError
from ingestion.models import AcceptedRequest
from ingestion.writer import GroupCommitWriter
from tests.conftest import other_session

pytestmark = pytest.mark.postgresql
DEADLINE_SECONDS = 0.5


def _identify(user_id: str) -> list:
    message = {"type": "identify", "timestamp": 1793527200000, "userId": user_id}
    return [(datetime.now(UTC), Accepted("v2/identify", "d" * 64, [message]))]


async def _answer(writer: GroupCommitWriter, user_id: str, after: float = 0) -> tuple:
    await asyncio.sleep(after)
    started = time.monotonic()
    try:
        await writer.store(_identify(user_id))
        status = 202
    except RequestError as error:
        assert error.retry_after is not None
        status = error.status
    return user_id, status, time.monotonic() - started


def test_a_stuck_write_is_answered_503_at_its_deadline_and_the_next_one_goes_through(
    transactional_db,
):
    writer = GroupCommitWriter(gather_seconds=0.001, write_deadline_seconds=DEADLINE_SECONDS)

    async def scenario():
        try:
            assert (await _answer(writer, "usr_ann"))[1] == 202  # the writer is connected
            with other_session() as blocker:
                blocker.execute("LOCK TABLE ingestion_acceptedrequest IN ACCESS EXCLUSIVE MODE")
                stuck = await asyncio.gather(
                    _answer(writer, "usr_bo"), _answer(writer, "usr_cy", after=0.2)
                )
                await asyncio.sleep(0.5)  # the given-up writes' cancel requests have arrived
                blocker.rollback()
            return stuck, await _answer(writer, "usr_di")
        finally:
            await writer.close()

    stuck, after = asyncio.run(asyncio.wait_for(scenario(), 30))

    assert [(user, status) for user, status, _ in stuck] == [("usr_bo", 503), ("usr_cy", 503)]
    # Each one at its own deadline, not behind the write before it.
    assert all(DEADLINE_SECONDS <= took < DEADLINE_SECONDS + 0.4 for _, _, took in stuck), stuck
    assert after[:2] == ("usr_di", 202)
    stored = [
        message["userId"]
        for messages in AcceptedRequest.objects.order_by("id").values_list("messages", flat=True)
        for message in messages
    ]
    assert stored == ["usr_ann", "usr_di"]  # the given-up writes were called off, not committed
