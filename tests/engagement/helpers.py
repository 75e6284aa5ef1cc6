"""Builders for scoring tests: messages go through the real apply path (users, links, rollups)."""

import functools
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, date, datetime, timedelta

from django.db import connection

from engagement.erasure import erasure_request, erasure_run
from engagement.models import Erasure
from engagement.services import Message, messages_apply


def ms(days_ago: float = 0, hours: float = 0) -> int:
    """A message time `days_ago` UTC days before today at 00:30, plus `hours` (same day).

    In the first half hour of a UTC day, 00:30 is still to come, and a message of today would be
    in the future (a "seen within the last day" condition then leaves it out): there it is
    halfway between midnight and the first call of the day instead, still today, and the same
    for every later call, so a test that computes a time again finds the one it sent."""
    today = _today_at(datetime.now(UTC).date())
    return int((today - timedelta(days=days_ago) + timedelta(hours=hours)).timestamp() * 1000)


@functools.cache
def _today_at(day: date) -> datetime:
    """The time of day ms() puts today's messages at: 00:30, or earlier if that is to come."""
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return midnight + min(timedelta(minutes=30), (datetime.now(UTC) - midnight) / 2)


def track(user: str, event: str, *, days_ago: int = 0, times: int = 1, account: str | None = None):
    return [
        Message(
            message_type="track",
            timestamp_ms=ms(days_ago, hours=i * 0.001),
            user_id=user,
            event=event,
            group_id=account,
        )
        for i in range(times)
    ]


def group(user: str, account: str, traits: dict | None = None, *, days_ago: int = 40):
    return [
        Message(
            message_type="group",
            timestamp_ms=ms(days_ago),
            user_id=user,
            group_id=account,
            traits=traits,
        )
    ]


def identify(user: str, traits: dict, *, days_ago: int = 40):
    return [
        Message(message_type="identify", timestamp_ms=ms(days_ago), user_id=user, traits=traits)
    ]


def apply(tenant, *batches):
    messages = [m for batch in batches for m in batch]
    return messages_apply(product_id=tenant.product.id, messages=messages)


def erase(tenant, target, kind: str = Erasure.Kind.USER, **extra) -> Erasure:
    """Erase a user (or, with `kind`, an account) of the tenant's product, as the erase
    command does, without suppressing them; returns the finished erasure."""
    erasure = erasure_request(
        product_id=tenant.product.id,
        kind=kind,
        target_id=target.id,
        suppress=False,
        via=Erasure.Via.COMMAND,
        **extra,
    )
    return erasure_run(erasure_id=erasure.id)


def held_in_another_session(
    hold: Callable[[], AbstractContextManager], release: threading.Event
) -> threading.Thread:
    """Enter `hold()` on another thread, in that thread's own database session, and stay in it
    until `release` is set (10 s at most); returns once it is entered. The caller sets
    `release` and joins the thread."""
    entered = threading.Event()

    def run() -> None:
        try:
            with hold():
                entered.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    assert entered.wait(10)
    return thread


def ranks(tenant, kind: str) -> dict[str, float | None]:
    """Each scored user's (`kind` "user") or account's percentile rank by tracking id, as reads
    show it: the workspace's rank of the row's score."""
    from engagement.models import AccountScore, UserScore
    from engagement.selectors import score_percentile_ranks

    model = UserScore if kind == "user" else AccountScore
    by_score = score_percentile_ranks(workspace_id=tenant.workspace.id, kind=kind)
    rows = model.objects.filter(workspace=tenant.workspace).select_related(kind)
    return {getattr(row, kind).tracking_id: by_score[row.engagement_score] for row in rows}
