"""Client clock skew: where `sentAt` is present, timestamp = receivedAt - (sentAt - timestamp)."""

from datetime import UTC, datetime

import pytest

from engagement.models import Event
from ingestion import acceptance
from ingestion.acceptance.body import Reading
from ingestion.acceptance.fields import Clock
from ingestion.models import DroppedRequest
from tests.ingestion.segment_support import iso_now, segment_auth, track

pytestmark = pytest.mark.both_databases

NOW = 1_750_000_000_000  # the server's clock, Unix ms
SECOND = 1000
HOUR = 3600 * SECOND
SKEW = 5 * SECOND


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def corrected(message: dict, *, batch_sent_at: int | None = None) -> dict:
    reading = Reading(message, scan_strings=True, exact=True)
    return acceptance.segment_message(
        message, Clock(NOW, SKEW), reading, batch_sent_at=batch_sent_at
    )


def test_without_sent_at_the_timestamp_is_kept():
    assert corrected(track("u", "E", timestamp=iso(NOW - HOUR)))["timestamp"] == NOW - HOUR


def test_a_gap_within_the_threshold_is_network_delay_and_kept():
    message = track("u", "E", timestamp=iso(NOW - 10 * SECOND), sentAt=iso(NOW - 3 * SECOND))

    assert corrected(message)["timestamp"] == NOW - 10 * SECOND


def test_a_fast_client_clock_is_corrected():
    # The client's clock runs 2 hours ahead: it says the event happened 10 minutes before sending.
    client_now = NOW + 2 * HOUR
    message = track("u", "E", timestamp=iso(client_now - 600 * SECOND), sentAt=iso(client_now))

    assert corrected(message)["timestamp"] == NOW - 600 * SECOND


def test_a_slow_client_clock_is_corrected():
    client_now = NOW - 3 * 24 * HOUR
    message = track("u", "E", timestamp=iso(client_now - 60 * SECOND), sentAt=iso(client_now))

    assert corrected(message)["timestamp"] == NOW - 60 * SECOND


def test_a_client_clock_days_ahead_is_corrected_not_dropped():
    client_now = NOW + 3 * 24 * HOUR
    message = track("u", "E", timestamp=iso(client_now), sentAt=iso(client_now))

    assert corrected(message) == {
        "type": "track",
        "timestamp": NOW,
        "userId": "u",
        "event": "E",
    }


def test_the_batch_sent_at_applies_to_items_without_their_own():
    message = track("u", "E", timestamp=iso(NOW + HOUR - 30 * SECOND))

    assert corrected(message, batch_sent_at=NOW + HOUR)["timestamp"] == NOW - 30 * SECOND


def test_an_item_sent_at_wins_over_the_batch_one():
    message = track("u", "E", timestamp=iso(NOW - 60 * SECOND), sentAt=iso(NOW))

    assert corrected(message, batch_sent_at=NOW + HOUR)["timestamp"] == NOW - 60 * SECOND


def test_a_message_already_corrected_upstream_is_kept():
    """Segment and RudderStack forward messages with receivedAt and a corrected timestamp; their
    sentAt is from the original client and may be hours old after a replay."""
    message = track(
        "u",
        "E",
        timestamp=iso(NOW - 5 * HOUR),
        sentAt=iso(NOW - 5 * HOUR),
        receivedAt=iso(NOW - 5 * HOUR + 200),
    )

    assert corrected(message)["timestamp"] == NOW - 5 * HOUR


def test_a_corrected_time_more_than_24_hours_ahead_is_a_drop():
    message = track("u", "E", timestamp=iso(NOW + 30 * HOUR), sentAt=iso(NOW))

    marker = corrected(message)

    assert (marker["type"], marker["reason"]) == ("drop", "timestamp_in_future")


def test_an_unparseable_sent_at_is_a_field_error():
    with pytest.raises(acceptance.RequestError) as caught:
        corrected(track("u", "E", timestamp=iso(NOW), sentAt="soon"))

    assert list(caught.value.fields) == ["sentAt"]


# --- Through HTTP, with the server's own clock -----------------------------------------------


def test_a_skewed_batch_is_stored_at_the_corrected_time(acme, post_json, drain):
    client_offset = 2 * 3600  # the SDK host's clock is two hours fast
    body = {
        "batch": [track("usr_ann", "E", timestamp=iso_now(offset_seconds=client_offset - 600))],
        "sentAt": iso_now(offset_seconds=client_offset),
    }

    response = post_json("/v1/batch", body, auth=segment_auth(acme.key.key))

    assert response.status_code == 200
    drain()
    age = datetime.now(UTC) - Event.objects.get().timestamp
    assert 595 <= age.total_seconds() <= 610


def test_the_threshold_is_a_setting(acme, post_json, drain, settings):
    settings.INGESTION_CLOCK_SKEW_SECONDS = 4 * 3600
    timestamp = "2025-01-01T00:00:00+00:00"
    body = {
        "batch": [track("usr_ann", "E", timestamp=timestamp)],
        "sentAt": iso_now(offset_seconds=3600),
    }

    post_json("/v1/batch", body, auth=segment_auth(acme.key.key))
    drain()

    assert Event.objects.get().timestamp == datetime(2025, 1, 1, tzinfo=UTC)


def test_a_single_segment_call_in_the_far_future_is_202_then_dropped(acme, post_json, drain):
    body = track("usr_ann", "E", timestamp=iso_now(offset_seconds=48 * 3600), sentAt=iso_now())

    response = post_json("/segment", body, auth=segment_auth(acme.key.key))

    assert response.status_code == 202
    drain()
    drop = DroppedRequest.objects.get()
    assert (drop.product, drop.endpoint, drop.reason) == (
        acme.product,
        "segment",
        "timestamp_in_future",
    )
    assert not Event.objects.exists()


def test_a_batch_item_in_the_far_future_is_rejected_and_dropped(acme, post_json, drain):
    body = {
        "batch": [
            track("usr_ann", "Now"),
            track("usr_ann", "Later", timestamp=iso_now(offset_seconds=48 * 3600)),
        ],
        "sentAt": iso_now(),
    }

    response = post_json("/v1/batch", body, auth=segment_auth(acme.key.key))

    assert response.status_code == 200
    assert [(r["index"], r["code"]) for r in response.json()["rejected"]] == [
        (1, "timestamp_in_future")
    ]
    drain()
    assert list(Event.objects.values_list("name", flat=True)) == ["Now"]
    assert DroppedRequest.objects.get().item_index == 1
