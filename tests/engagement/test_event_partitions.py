"""Raw events: daily partitions made ahead, retention by whole days, rollups kept."""

from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection

from engagement.models import Event, EventRollup
from engagement.services import Message, event_partitions_maintain, messages_apply

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

TODAY = date(2026, 11, 22)


def partitions() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'engagement_event' "
            "ORDER BY 1"
        )
        return [name for (name,) in cursor.fetchall()]


@pytest.fixture(autouse=True)
def no_daily_partitions(db) -> None:
    """Start from the DEFAULT partition alone: end-to-end tests' real workers commit today's
    partitions to the shared test database. Dropped inside the test's transaction, so they
    come back when it rolls back."""
    if connection.vendor != "postgresql":
        return
    for name in partitions():
        if name != "engagement_event_default":
            with connection.cursor() as cursor:
                cursor.execute(f'DROP TABLE "{name}"')


def track(product_id: int, when: datetime, event: str = "Report_Created") -> None:
    messages_apply(
        product_id=product_id,
        messages=[
            Message(
                message_type="track",
                timestamp_ms=int(when.timestamp() * 1000),
                user_id="ann",
                event=event,
            )
        ],
    )


@pytest.mark.postgresql
def test_partitions_are_made_for_today_and_a_week_ahead_and_take_rows_already_there(acme):
    noon = datetime(2026, 11, 22, 12, tzinfo=UTC)
    track(acme.product.id, noon)  # lands in the DEFAULT partition: no daily one yet

    result = event_partitions_maintain(today=TODAY)

    assert result["created"] == 8
    assert partitions() == ["engagement_event_default"] + [
        f"engagement_event_p{TODAY + timedelta(days=n):%Y%m%d}" for n in range(8)
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM engagement_event_p20261122")
        assert cursor.fetchone()[0] == 1
    assert Event.objects.get().timestamp == noon
    track(acme.product.id, noon + timedelta(days=1))
    assert Event.objects.count() == 2
    assert event_partitions_maintain(today=TODAY)["created"] == 0


@pytest.mark.postgresql
def test_retention_drops_old_days_and_keeps_rollups(acme, settings):
    settings.EVENTS_RETENTION_DAYS = 30
    event_partitions_maintain(today=TODAY - timedelta(days=40))
    old = datetime(2026, 10, 14, 9, tzinfo=UTC)  # 39 days before TODAY, in a daily partition
    older = datetime(2026, 1, 1, tzinfo=UTC)  # in DEFAULT
    recent = datetime(2026, 11, 21, tzinfo=UTC)
    for when in (old, older, recent):
        track(acme.product.id, when)

    result = event_partitions_maintain(today=TODAY)

    assert result["dropped"] >= 1 and result["deleted"] == 1
    assert "engagement_event_p20261014" not in partitions()
    assert list(Event.objects.values_list("timestamp", flat=True)) == [recent]
    assert EventRollup.objects.filter(product=acme.product).count() == 3


def test_retention_deletes_old_raw_events_on_any_database_and_keeps_rollups(acme, settings):
    settings.EVENTS_RETENTION_DAYS = 30
    recent = datetime(2026, 11, 21, tzinfo=UTC)
    for when in (datetime(2026, 1, 1, tzinfo=UTC), recent):
        track(acme.product.id, when)

    event_partitions_maintain(today=TODAY)

    assert list(Event.objects.values_list("timestamp", flat=True)) == [recent]
    assert EventRollup.objects.filter(product=acme.product).count() == 2
