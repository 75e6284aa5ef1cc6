"""The real `segment-analytics-python` and `rudder-sdk-python` SDKs, pointed at a live server of
ours (real HTTP, the real test database), unchanged: what they send ends up stored."""

import threading
from datetime import UTC, datetime

import pytest
from rudderstack.analytics.client import Client as RudderClient
from segment.analytics.client import Client as SegmentClient

from engagement.models import Account, Event, User
from ingestion.models import AcceptedRequest, DroppedRequest

pytestmark = pytest.mark.e2e

WHEN = datetime(2025, 6, 13, 4, 45, 14, tzinfo=UTC)


def segment_client(live_door, key: str, errors: list, **options) -> SegmentClient:
    return SegmentClient(
        key,
        host=live_door.url,
        gzip=True,
        on_error=lambda error, batch: errors.append(error),
        upload_interval=0.05,
        max_retries=3,
        **options,
    )


def rudder_client(live_door, key: str, errors: list) -> RudderClient:
    return RudderClient(  # gzip is on by default in RudderStack's SDK
        key,
        host=live_door.url,
        on_error=lambda error, batch: errors.append(error),
        upload_interval=0.05,
        max_retries=3,
    )


def send_a_session(client) -> None:
    """One product session, as an application instrumented with either SDK reports it."""
    client.identify("usr_ann", {"email": "ann@acme.test", "name": "Ann"}, timestamp=WHEN)
    client.group("usr_ann", "acct_acme", {"name": "Acme", "plan": "pro"}, timestamp=WHEN)
    client.track(
        "usr_ann",
        "Report_Created",
        {"rows": 12},
        context={"groupId": "acct_acme", "ip": "203.0.113.9"},
        timestamp=WHEN,
        message_id="report-1",
    )
    # The application retries a call after a timeout: same messageId, applied once.
    client.track(
        "usr_ann",
        "Report_Created",
        {"rows": 12},
        context={"groupId": "acct_acme"},
        timestamp=WHEN,
        message_id="report-1",
    )
    client.page("usr_ann", "Docs", "Getting Started", {"url": "https://acme.test"}, timestamp=WHEN)
    client.screen("usr_ann", "Settings", "Billing", timestamp=WHEN)
    client.alias("usr_old", "usr_ann", timestamp=WHEN)
    client.shutdown()


def assert_session_stored(tenant) -> None:
    ann = User.objects.get(product=tenant.product, tracking_id="usr_ann")
    assert ann.identified is True
    assert ann.traits == {"email": "ann@acme.test", "name": "Ann"}
    account = Account.objects.get(product=tenant.product, tracking_id="acct_acme")
    assert account.traits == {"name": "Acme", "plan": "pro"}
    assert list(ann.memberships.values_list("account__tracking_id", flat=True)) == ["acct_acme"]
    assert sorted(
        Event.objects.filter(product=tenant.product).values_list(
            "name", "account__tracking_id", "timestamp"
        )
    ) == [
        ("Report_Created", "acct_acme", WHEN),
        ("Viewed Billing Screen", "acct_acme", WHEN),
        ("Viewed Getting Started Page", "acct_acme", WHEN),
    ]
    # The alias call: usr_old is remembered as usr_ann (it had no user of its own to merge).
    assert not DroppedRequest.objects.filter(product=tenant.product).exists()
    assert list(ann.aliases.values_list("previous_id", flat=True)) == ["usr_old"]


def test_segment_analytics_python_posts_unchanged(acme, live_door, drain):
    errors: list = []

    send_a_session(segment_client(live_door, acme.key.key, errors))

    assert errors == []
    assert AcceptedRequest.objects.exists()
    drain()
    assert_session_stored(acme)


def test_rudder_sdk_python_posts_unchanged(acme, live_door, drain):
    errors: list = []

    send_a_session(rudder_client(live_door, acme.key.key, errors))

    assert errors == []
    drain()
    assert_session_stored(acme)


def test_the_sdk_waits_out_a_503_and_its_batch_lands_once(acme, live_door, drain, settings):
    """While the backlog is over its limit the SDK gets 503 + Retry-After, waits, retries."""
    settings.INGESTION_RETRY_AFTER_SECONDS = 1
    settings.INGESTION_BACKLOG_LIMIT = 0
    reopen = threading.Timer(1.5, lambda: setattr(settings, "INGESTION_BACKLOG_LIMIT", 10**6))
    reopen.start()
    errors: list = []
    client = segment_client(live_door, acme.key.key, errors, sync_mode=False)

    client.track("usr_ann", "Report_Created", timestamp=WHEN, message_id="m-1")
    client.shutdown()
    reopen.join()

    assert errors == []
    drain()
    assert Event.objects.filter(product=acme.product).count() == 1


def test_a_bad_key_is_answered_like_segment_so_the_sdk_reports_no_error(acme, live_door, drain):
    errors: list = []

    client = segment_client(live_door, "not-a-key-of-ours", errors)
    client.track("usr_ann", "Report_Created", timestamp=WHEN)
    client.shutdown()

    assert errors == []
    drain()
    assert DroppedRequest.objects.get().reason == "unknown_key"
    assert not Event.objects.exists()
