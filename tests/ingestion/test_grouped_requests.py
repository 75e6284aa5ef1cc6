"""Requests the group-commit writer stores together: on every database, the requests of one write
that share an ingestion key are one row, and every one of them is still applied, dropped and
counted as the request it was."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from engagement import services as engagement_services
from engagement.models import Event, User
from ingestion import acceptance
from ingestion.acceptance import Accepted
from ingestion.models import AcceptedRequest, DroppedRequest
from ingestion.store import ROW_MESSAGES, backlog_refresh, store_accepted_batch

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def track(user_id: str, event: str = "Report_Created") -> dict:
    return {"type": "track", "timestamp": _ms(T0), "userId": user_id, "event": event}


def identify(user_id: str) -> dict:
    return {"type": "identify", "timestamp": _ms(T0), "userId": user_id, "traits": {"plan": "pro"}}


def entry(digest: str, *messages: dict, endpoint: str = "v2/track", at: datetime | None = None):
    received_at = at or datetime.now(UTC)
    return received_at, Accepted(endpoint=endpoint, key_digest=digest, messages=list(messages))


def test_one_write_stores_a_row_per_key_and_counts_every_request(acme, globex):
    ann_at, bo_at = T0, T0 + timedelta(milliseconds=1)
    store_accepted_batch(
        [
            entry(acme.key.digest, track("usr_ann"), at=ann_at),
            entry(globex.key.digest, track("usr_gil")),
            entry(acme.key.digest, identify("usr_bo"), endpoint="v2/identify", at=bo_at),
        ],
        kick=False,
    )

    acme_row, globex_row = AcceptedRequest.objects.order_by("id")
    assert [m["userId"] for m in acme_row.messages] == ["usr_ann", "usr_bo"]
    assert (acme_row.request_count, acme_row.endpoint, acme_row.received_at) == (
        2,
        "several",
        bo_at,
    )
    micros = [round(at.timestamp() * 1_000_000) for at in (ann_at, bo_at)]
    assert acme_row.requests == [["v2/track", micros[0], 1], ["v2/identify", micros[1], 1]]
    assert (globex_row.request_count, globex_row.requests) == (1, None)
    assert backlog_refresh() == 3


def test_a_row_takes_no_more_requests_once_it_holds_a_full_batch(acme, drain):
    half_batch = [track(f"usr_{n}") for n in range(ROW_MESSAGES // 2)]
    store_accepted_batch(
        [entry(acme.key.digest, *half_batch, endpoint="v1/batch") for _ in range(3)], kick=False
    )

    assert list(AcceptedRequest.objects.order_by("id").values_list("request_count", flat=True)) == [
        2,
        1,
    ]
    assert drain() == 3
    assert Event.objects.count() == 3 * len(half_batch)


def test_every_request_of_a_row_is_applied(acme, drain):
    store_accepted_batch(
        [entry(acme.key.digest, track(f"usr_{n}")) for n in range(3)]
        + [entry(acme.key.digest, identify("usr_0"), endpoint="v2/identify")],
        kick=False,
    )

    assert drain() == 4
    assert Event.objects.count() == 3
    assert User.objects.get(tracking_id="usr_0").identified
    assert not AcceptedRequest.objects.exists()


def test_a_row_under_an_unknown_key_is_dropped_request_by_request(acme, drain):
    unknown = "0" * 64
    times = [T0, T0 + timedelta(milliseconds=1)]
    store_accepted_batch(
        [
            entry(unknown, track("usr_ann"), at=times[0]),
            entry(unknown, identify("usr_bo"), endpoint="v2/identify", at=times[1]),
        ],
        kick=False,
    )

    assert drain() == 2
    drops = list(DroppedRequest.objects.order_by("received_at"))
    assert [(d.reason, d.endpoint, d.message_count, d.received_at) for d in drops] == [
        ("unknown_key", "v2/track", 1, times[0]),
        ("unknown_key", "v2/identify", 1, times[1]),
    ]


def test_a_key_revoked_within_a_row_keeps_the_requests_sent_before(acme, drain):
    revoked_at = timezone.now()
    before, after = revoked_at - timedelta(milliseconds=1), revoked_at + timedelta(milliseconds=1)
    store_accepted_batch(
        [
            entry(acme.key.digest, track("usr_ann"), at=before),
            entry(acme.key.digest, track("usr_bo"), at=after),
        ],
        kick=False,
    )
    acme.key.revoked_at = revoked_at
    acme.key.save()

    assert drain() == 2
    assert list(Event.objects.values_list("user__tracking_id", flat=True)) == ["usr_ann"]
    drop = DroppedRequest.objects.get()
    assert (drop.reason, drop.received_at) == ("revoked_key", after)


def test_a_request_that_cannot_be_applied_is_dropped_alone(acme, drain, monkeypatch):
    applied = engagement_services.messages_apply

    def fails_on_poison(**kwargs):
        if any(m.user_id == "usr_poison" for m in kwargs["messages"]):
            raise RuntimeError("a bug in applying")
        return applied(**kwargs)

    monkeypatch.setattr(engagement_services, "messages_apply", fails_on_poison)
    store_accepted_batch(
        [entry(acme.key.digest, track(f"usr_{n}")) for n in range(5)]
        + [entry(acme.key.digest, identify("usr_poison"), endpoint="v2/identify")]
        + [entry(acme.key.digest, track(f"usr_{n}")) for n in range(5, 8)],
        kick=False,
    )
    assert AcceptedRequest.objects.count() == 1

    assert drain() == 9

    assert Event.objects.count() == 8
    drop = DroppedRequest.objects.get()
    assert (drop.reason, drop.endpoint, drop.message_count) == ("apply_failed", "v2/identify", 1)


def test_items_left_out_of_a_batch_keep_their_place_in_it(acme, drain):
    left_out = acceptance.drop_marker(
        acceptance.DROP_UNSUPPORTED_TYPE, "log is not supported", index=1
    )
    store_accepted_batch(
        [
            entry(acme.key.digest, track("usr_ann")),
            entry(
                acme.key.digest,
                track("usr_bo"),
                left_out,
                track("usr_cy"),
                endpoint="v1/batch",
            ),
        ],
        kick=False,
    )

    assert drain() == 2
    assert set(Event.objects.values_list("user__tracking_id", flat=True)) == {
        "usr_ann",
        "usr_bo",
        "usr_cy",
    }
    drop = DroppedRequest.objects.get()
    assert (drop.reason, drop.endpoint, drop.item_index) == ("unsupported_type", "v1/batch", 1)
