"""Applying one product's claimed requests to engagement, and, when a part fails, finding the
requests and then the messages that cannot be applied, so each is dropped alone.

Everything a part applies, its seen messageIds included, is written in one savepoint with the
effect, so a failure never marks an id seen unapplied.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import cast

from django.db import OperationalError, transaction

from engagement import services as engagement_services
from engagement.services import Message
from ingestion import acceptance
from ingestion.backends import ingestion_backend
from ingestion.models import DroppedRequest
from ingestion.services.dedup import unseen_messages
from ingestion.services.drops import apply_failed_drop, drops_record, parent_refused_drop
from ingestion.services.queue import (
    ClaimedRequest,
    ClaimedUnderKeys,
    stored_messages,
)
from ingestion.services.staging import messages_stage
from ingestion.services.suppression import messages_unsuppressed

logger = logging.getLogger(__name__)

# Tries (savepoints) one drain may spend searching requests that failed whole for their bad
# messages. One bad message among 2,500 takes about 24 tries, a few tenths of a second; each
# further one about 2 x log2(messages / bad ones). Without a bound, a bug that fails every
# message would cost two tries a message (about 13 s for one full Segment batch on PostgreSQL,
# minutes for a drain of them) with the drain's transaction open; past it, a part that fails is
# dropped whole.
MESSAGE_TRIES_PER_DRAIN = 500


@dataclass(slots=True)
class DrainApply:
    """What one drain's applying shares across its products and its tries: its turn after the
    drains holding earlier rows that link users (`wait_for_earlier`, see queue), waited for once,
    before anything is applied; and the tries left for searching failed requests for their bad
    messages."""

    wait_for_earlier: Callable[[], None] = lambda: None
    tries_left: int = field(default_factory=lambda: MESSAGE_TRIES_PER_DRAIN)
    waited: bool = False

    def turn(self) -> None:
        """Return once the drains this one must come after have ended. Called right before each
        apply: what precedes it (a claim's staging and its messageIds) runs while they apply."""
        if not self.waited:
            self.wait_for_earlier()
            self.waited = True


def requests_apply(
    product_id: int,
    requests: Sequence[ClaimedRequest],
    run: DrainApply,
    *,
    under_keys: ClaimedUnderKeys | None = None,
) -> list[DroppedRequest]:
    """Apply one product's requests (with `under_keys`: every claimed row under those keys)
    together; if that fails, each half again, down to single requests, so one bad
    request is found in a few dozen tries in a batch of thousands, not one per request; then
    that request's messages (see _request_search), so a bad message is dropped alone, not with
    the request it came in. Returns the drops."""
    try:
        with transaction.atomic():
            ingestion_backend().requests_apply_together(product_id, requests, under_keys, run.turn)
        return []
    except OperationalError:
        raise  # the database itself is in trouble: leave the rows for the next drain
    except Exception as error:
        if under_keys is not None:  # now one by one
            requests = under_keys.requests()
        if len(requests) == 1:
            return _request_search(_BadMessageSearch(requests[0], product_id, run), error)
    middle = len(requests) // 2
    return requests_apply(product_id, requests[:middle], run) + requests_apply(
        product_id, requests[middle:], run
    )


def to_domain(message: dict, source: object = None) -> Message:
    return Message(
        message_type=message["type"],
        timestamp_ms=message["timestamp"],
        user_id=message.get("userId"),
        group_id=message.get("groupId"),
        event=message.get("event"),
        traits=message.get("traits"),
        previous_id=message.get("previousId"),
        source=source,
    )


def apply_staged(
    product_id: int,
    requests: Sequence[ClaimedRequest],
    under_keys: ClaimedUnderKeys | None,
    turn: Callable[[], None],
) -> None:
    """The SQL route (PostgreSQL): the messages staged from their stored rows, tracks applied
    without a Python object each (ingestion/services/staging.py); `turn` returns when they may
    be applied (DrainApply.turn)."""
    others, staged_tracks = messages_stage(product_id, requests, under_keys)
    turn()
    result = engagement_services.messages_apply(
        product_id=product_id,
        messages=[to_domain(message, request_id) for request_id, message in others],
        staged_tracks=staged_tracks,
    )
    if result.refused_parents:
        by_id = {r.id: r for r in (under_keys.requests() if under_keys else requests)}
        drops_record(
            [
                parent_refused_drop(by_id[cast(int, r.source)], product_id, r)
                for r in result.refused_parents
            ]
        )


def apply_loaded(
    product_id: int, requests: Sequence[ClaimedRequest], turn: Callable[[], None]
) -> None:
    """The generic route: the requests' messages loaded, less suppressed people; applied once
    `turn` returns (DrainApply.turn)."""
    turn()
    # Which request each message came in (a message is one object in one request's list).
    request_of = {id(m): r for r in requests for m in r.loaded_messages}
    kept = messages_unsuppressed(product_id, requests)
    _apply_loaded(product_id, kept, lambda message: request_of[id(message)])


def _apply_loaded(
    product_id: int,
    messages: Iterable[dict],
    request_of: Callable[[dict], ClaimedRequest],
) -> None:
    """The generic route (SQLite's, and on PostgreSQL the one a failed request falls back to):
    the messages loaded into Python, less drop markers and repeats, applied in one call;
    `request_of` says which request a message came in."""
    result = engagement_services.messages_apply(
        product_id=product_id,
        messages=[
            to_domain(message, request_of(message))
            for message in unseen_messages(product_id, messages)
        ],
    )
    if result.refused_parents:
        # The source of each message is the request it came in (to_domain's second argument).
        drops_record(
            [
                parent_refused_drop(cast(ClaimedRequest, r.source), product_id, r)
                for r in result.refused_parents
            ]
        )


@dataclass(frozen=True, slots=True)
class _BadMessageSearch:
    """The search of one request that failed whole for the messages that cannot be applied."""

    request: ClaimedRequest
    product_id: int
    run: DrainApply


def _request_search(search: _BadMessageSearch, error: Exception) -> list[DroppedRequest]:
    """A request that failed whole (with `error`): apply its messages through the generic route,
    in halves, down to single messages (each try in a savepoint), so a message that cannot be
    applied is dropped alone and the others are applied, in order. The failed try was the
    generic route on SQLite, so the search starts at the halves there; on PostgreSQL it was the
    SQL route, and the whole request is tried once more the generic way."""
    request = search.request
    # Each message with its place in the request (a batch's item index): drop markers keep
    # theirs, so the indexes are the sender's.
    items = [
        (index, m) for index, m in enumerate(stored_messages(request)) if not acceptance.is_drop(m)
    ]
    logger.warning(
        "accepted request %s cannot be applied whole; applying its %s messages in parts",
        request.id,
        len(items),
        exc_info=error,
    )
    # The generic route failed already: start at the halves; the SQL route: try it whole once.
    retried_whole = ingestion_backend().applies_through_staging
    return _items_apply(search, items, None if retried_whole else error)


def _items_apply(
    search: _BadMessageSearch, items: list[tuple[int, dict]], error: Exception | None
) -> list[DroppedRequest]:
    """Apply these messages of a request together, or with `error` (they just failed together)
    in halves; a single message that fails is dropped. Once the drain is out of tries, a part
    that fails is dropped whole (the parts not tried yet still get their one try each)."""
    if not items:
        return []
    if error is None:
        search.run.tries_left -= 1
        search.run.turn()
        try:
            with transaction.atomic():
                messages = [message for _, message in items]
                kept = messages_unsuppressed(search.product_id, [search.request], messages)
                _apply_loaded(search.product_id, kept, lambda _: search.request)
            return []
        except OperationalError:
            raise  # the database itself is in trouble: leave the rows for the next drain
        except Exception as failure:
            error = failure
    if len(items) == 1 or search.run.tries_left <= 0:
        first, last = items[0][0], items[-1][0]
        logger.error(
            "dropping %s of accepted request %s: it cannot be applied",
            f"item {first}" if len(items) == 1 else f"{len(items)} items from {first} to {last}",
            search.request.id,
            exc_info=error,
        )
        return [apply_failed_drop(search.request, search.product_id, items, error)]
    middle = len(items) // 2
    return _items_apply(search, items[:middle], None) + _items_apply(search, items[middle:], None)
