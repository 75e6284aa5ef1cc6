"""The rollups of each day that ended are stored again in user order (event_store.
rollups_order_past_days, PostgreSQL's backend.rollups_order): every row and value kept, the
scores unchanged, the day's rows stored by user, today left as the drain stored it, a day whose
rollups writers hold left to the next run."""

import threading
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection, transaction

from engagement import event_store
from engagement.backends import postgresql
from engagement.models import EventRollup, Product
from engagement.scoring import workspace_rescore
from engagement.services import event_rollups_order
from engagement.tasks import event_rollups_order as event_rollups_order_task
from tests.engagement.helpers import apply, group, held_in_another_session, track
from tests.engagement.test_history import day, today
from tests.engagement.test_scoring import snapshot

pytestmark = pytest.mark.postgresql  # where rows are stored is PostgreSQL's


def rollup_rows(tenant) -> set[tuple]:
    return set(
        EventRollup.objects.filter(product_id=tenant.workspace.product_id).values_list(
            "id", "user_id", "account_id", "event_name", "day", "count", "last_at", "updated_at"
        )
    )


def users_as_stored(tenant, day_) -> list[int]:
    """The user ids of a day's rollups in the order they are stored in the table."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT user_id FROM engagement_eventrollup WHERE product_id = %s AND day = %s "
            "ORDER BY ctid",
            [tenant.workspace.product_id, day_],
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.fixture
def busy_days(acme):
    """Acme with ten users whose events came in reverse user order, two and one days ago and
    today, so each day's rollups are stored highest user first."""
    names = [f"user-{n:02d}" for n in range(10)]
    apply(acme, *(group(name, "acme-co") for name in names))
    for days_ago in (2, 1, 0):
        for name in reversed(names):
            apply(acme, track(name, "Report_Created", days_ago=days_ago, times=2))
            apply(acme, track(name, "Login", days_ago=days_ago))
    return acme


def test_ended_days_are_stored_by_user_with_every_value_kept(busy_days, settings):
    settings.ROLLUPS_ORDER_DAYS_PER_RUN = 100
    before_rows = rollup_rows(busy_days)
    workspace_rescore(workspace_id=busy_days.workspace.id)
    before_scores = snapshot(busy_days)
    assert users_as_stored(busy_days, day(1)) != sorted(users_as_stored(busy_days, day(1)))

    done = event_rollups_order_task()  # what the beat runs every hour

    assert done == {"days": 2, "rows": 40, "put_off": 0}  # 20 rollups on each of two days
    assert "engagement.tasks.event_rollups_order" in {
        entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()
    }
    assert rollup_rows(busy_days) == before_rows
    for ended in (day(2), day(1)):
        assert users_as_stored(busy_days, ended) == sorted(users_as_stored(busy_days, ended))
    assert users_as_stored(busy_days, day(0)) != sorted(users_as_stored(busy_days, day(0)))
    workspace_rescore(workspace_id=busy_days.workspace.id)
    assert snapshot(busy_days) == before_scores


def test_each_day_is_ordered_once_a_few_days_a_run_from_the_first_within_reach(busy_days, settings):
    reach = event_store.ROLLUPS_ORDER_REACH_DAYS
    apply(busy_days, track("user-00", "Login", days_ago=reach + 10))  # out of reach
    product = Product.objects.get(id=busy_days.workspace.product_id)
    settings.ROLLUPS_ORDER_DAYS_PER_RUN = 1

    assert event_rollups_order(today=today()) == {"days": 1, "rows": 0, "put_off": 0}
    product.refresh_from_db()
    assert product.rollups_ordered_through == day(reach)

    settings.ROLLUPS_ORDER_DAYS_PER_RUN = 100
    assert event_rollups_order(today=today()) == {"days": reach - 1, "rows": 40, "put_off": 0}
    product.refresh_from_db()
    assert product.rollups_ordered_through == day(1)
    assert event_rollups_order(today=today()) == {"days": 0, "rows": 0, "put_off": 0}
    # The next day, only the day that ended since.
    assert event_rollups_order(today=today() + timedelta(days=1)) == {
        "days": 1,
        "rows": 20,
        "put_off": 0,
    }


def test_a_product_starts_at_its_first_rollup(busy_days, settings):
    settings.ROLLUPS_ORDER_DAYS_PER_RUN = 1

    assert event_rollups_order(today=today()) == {"days": 1, "rows": 20, "put_off": 0}
    assert Product.objects.get(id=busy_days.workspace.product_id).rollups_ordered_through == day(2)


def test_a_day_is_moved_in_chunks_of_whole_users(busy_days, monkeypatch):
    monkeypatch.setattr(postgresql, "_ORDER_CHUNK_ROWS", 3)
    before = rollup_rows(busy_days)

    moved = postgresql.PostgresBackend().rollups_order(busy_days.workspace.product_id, day(1))

    assert moved == 20
    assert rollup_rows(busy_days) == before
    assert users_as_stored(busy_days, day(1)) == sorted(users_as_stored(busy_days, day(1)))


@contextmanager
def rollups_written_by_another_session():
    """A transaction holding the lock every writer of the rollups takes (as a drain does)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("LOCK TABLE engagement_eventrollup IN ROW EXCLUSIVE MODE")
        yield


@pytest.mark.django_db(transaction=True)
def test_a_day_whose_rollups_writers_hold_is_left_to_the_next_run(acme, monkeypatch):
    monkeypatch.setattr(postgresql, "_ORDER_LOCK_TIMEOUT", "200ms")
    apply(acme, group("ann", "acme-co"), track("ann", "Login", days_ago=1))
    before = rollup_rows(acme)
    product = Product.objects.get(id=acme.workspace.product_id)
    product.rollups_ordered_through = day(2)
    product.save()
    release = threading.Event()
    writer = held_in_another_session(rollups_written_by_another_session, release)
    try:
        put_off = event_rollups_order(today=today())
    finally:
        release.set()
        writer.join()

    assert put_off == {"days": 0, "rows": 0, "put_off": 1}
    product.refresh_from_db()
    assert product.rollups_ordered_through == day(2)
    assert rollup_rows(acme) == before
    assert event_rollups_order(today=today()) == {"days": 1, "rows": 1, "put_off": 0}
