"""The rollups of each day that ended are stored again by account, then user (event_store.
rollups_order_past_days, PostgreSQL's backend.rollups_order): every row and value kept, the
scores unchanged, the day's rows stored by account and user, today left as the drain stored it,
a day whose rollups writers hold left to the next run."""

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


def keys_as_stored(tenant, day_) -> list[tuple[int, int]]:
    """The (account_key, user_id) of a day's rollups in the order they are stored in the table
    (account_key 0: events without an account)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT account_key, user_id FROM engagement_eventrollup "
            "WHERE product_id = %s AND day = %s ORDER BY ctid",
            [tenant.workspace.product_id, day_],
        )
        return [(row[0], row[1]) for row in cursor.fetchall()]


@pytest.fixture
def busy_days(acme):
    """Acme with ten users whose events came in reverse user order, two and one days ago and
    today, so each day's rollups are stored highest user first. Pairs of users go to acme-co
    and beta-co by turns, so neither account's users are neighbours in user order; the even
    users' reports name their account, the rest's events count for it all the same."""
    names = [f"user-{n:02d}" for n in range(10)]
    accounts = {name: ("acme-co", "beta-co")[n // 2 % 2] for n, name in enumerate(names)}
    apply(acme, *(group(name, accounts[name]) for name in names))
    for days_ago in (2, 1, 0):
        for n, name in reversed(list(enumerate(names))):
            account = accounts[name] if n % 2 == 0 else None
            apply(acme, track(name, "Report_Created", days_ago=days_ago, times=2, account=account))
            apply(acme, track(name, "Login", days_ago=days_ago))
    return acme


def stored_by_account_then_user(keys: list[tuple[int, int]]) -> bool:
    return keys == sorted(keys)


def test_ended_days_are_stored_by_account_then_user_with_every_value_kept(busy_days, settings):
    settings.ROLLUPS_ORDER_DAYS_PER_RUN = 100
    before_rows = rollup_rows(busy_days)
    workspace_rescore(workspace_id=busy_days.workspace.id)
    before_scores = snapshot(busy_days)
    assert not stored_by_account_then_user(keys_as_stored(busy_days, day(1)))

    done = event_rollups_order_task()  # what the beat runs every hour

    assert done == {"days": 2, "rows": 40, "put_off": 0}  # 20 rollups on each of two days
    assert "engagement.tasks.event_rollups_order" in {
        entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()
    }
    assert rollup_rows(busy_days) == before_rows
    for ended in (day(2), day(1)):
        keys = keys_as_stored(busy_days, ended)
        assert stored_by_account_then_user(keys)
        # Both accounts' rows, each block in user order: not the order of the users alone.
        assert len({account for account, _ in keys}) == 2
        assert [user for _, user in keys] != sorted(user for _, user in keys)
    assert not stored_by_account_then_user(keys_as_stored(busy_days, day(0)))
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
    moved_chunks = []
    chunk_order = postgresql._rollups_chunk_order

    def chunk_recorded(product_id, day_, low, high):
        moved_chunks.append((low, high))
        return chunk_order(product_id, day_, low, high)

    monkeypatch.setattr(postgresql, "_rollups_chunk_order", chunk_recorded)

    moved = postgresql.PostgresBackend().rollups_order(busy_days.workspace.product_id, day(1))

    assert moved == 20
    assert rollup_rows(busy_days) == before
    keys = keys_as_stored(busy_days, day(1))
    assert stored_by_account_then_user(keys)
    # Chunks of about 3 rows, one after the other, each from one (account, user) of the day to
    # the next: a user's rows within an account are never split.
    bounds = [low for low, _ in moved_chunks[1:]]
    assert len(moved_chunks) >= 20 // 3
    assert moved_chunks[0][0] is None and moved_chunks[-1][1] is None
    assert [high for _, high in moved_chunks[:-1]] == bounds
    assert bounds == sorted(set(bounds)) and set(bounds) <= set(keys)


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
