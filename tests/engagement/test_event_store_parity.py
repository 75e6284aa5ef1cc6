"""The event store writes the same rows on every database: PostgreSQL derives rollups, tallies,
activity and first/last seen in SQL, SQLite in Python, so the same named cases run through both
(this file is in the SQLite pass too), with tracks given as messages and with tracks a caller
staged itself, as the ingestion drain does on PostgreSQL."""

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.db.models import Sum

from engagement.models import (
    Account,
    Event,
    EventActivity,
    EventDayTally,
    EventName,
    EventRollup,
    User,
)
from engagement.services import Message, messages_apply
from engagement.track_staging import staged_tracks_start

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

# One millisecond before a UTC midnight, so a case can straddle it.
T0 = datetime(2026, 3, 10, 23, 59, 59, 999_000, tzinfo=UTC)
DAY = T0.date()
NEXT_DAY = DAY + timedelta(days=1)


@dataclass(frozen=True)
class Track:
    user: str
    event: str
    at: datetime
    account: str | None = None


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _apply_loaded(tenant, batch: list[Track]) -> None:
    messages_apply(
        product_id=tenant.product.id,
        messages=[
            Message(
                message_type="track",
                timestamp_ms=_ms(t.at),
                user_id=t.user,
                event=t.event,
                group_id=t.account,
            )
            for t in batch
        ],
    )


def _apply_staged(tenant, batch: list[Track]) -> None:
    with transaction.atomic():
        staged = staged_tracks_start()
        with connection.cursor() as cursor:
            cursor.executemany(
                f"{staged.INSERT_INTO} VALUES (%s, %s, %s, %s)",
                [(t.user, t.account, t.event, _ms(t.at)) for t in batch],
            )
        messages_apply(product_id=tenant.product.id, messages=[], staged_tracks=staged)


@pytest.fixture(params=["loaded", "staged"])
def store(request):
    """Store batches of tracks given as messages, or staged by the caller (the drain's way)."""
    apply = _apply_loaded if request.param == "loaded" else _apply_staged

    def run(tenant, *batches: list[Track]) -> None:
        for batch in batches:
            apply(tenant, batch)

    return run


def _sorted(rows) -> list[tuple]:
    """Rows in order, no account (None) before any account."""
    return sorted(rows, key=lambda row: tuple("" if value is None else value for value in row))


def _tids(model, ids) -> list[str]:
    names = dict(model.objects.filter(id__in=ids).values_list("id", "tracking_id"))
    return sorted(names[i] for i in ids)


def events(tenant) -> list[tuple]:
    return _sorted(
        (e.user.tracking_id, e.account.tracking_id if e.account else None, e.name, e.timestamp)
        for e in Event.objects.filter(product=tenant.product).select_related("user", "account")
    )


def rollups(tenant) -> list[tuple]:
    rows = EventRollup.objects.filter(product=tenant.product).select_related("user", "account")
    for r in rows:
        assert r.account_key == (r.account_id or 0)
    return _sorted(
        (
            r.user.tracking_id,
            r.account.tracking_id if r.account else None,
            r.event_name,
            r.day,
            r.count,
            r.last_at,
        )
        for r in rows
    )


def tallies(tenant) -> dict[tuple[date, str], int]:
    rows = (
        EventDayTally.objects.filter(product=tenant.product)
        .values("day", "event_name")
        .annotate(events=Sum("count"))
    )
    return {(row["day"], row["event_name"]): row["events"] for row in rows}


def activity(tenant) -> list[tuple[list[str], list[str]]]:
    """The users and accounts of each stored batch, in the order the batches were stored."""
    return [
        (_tids(User, a.user_ids), _tids(Account, a.account_ids))
        for a in EventActivity.objects.filter(product=tenant.product).order_by("id")
    ]


def seen(tenant) -> dict[str, tuple[datetime | None, datetime | None]]:
    return {
        u.tracking_id: (u.first_seen_at, u.last_seen_at)
        for u in User.objects.filter(product=tenant.product)
    }


def event_names(tenant) -> list[str]:
    return sorted(EventName.objects.filter(product=tenant.product).values_list("name", flat=True))


def test_the_same_user_name_and_day_twice_is_one_rollup(acme, store):
    earlier = T0 - timedelta(hours=1)
    store(acme, [Track("ann", "Login", T0), Track("ann", "Login", earlier)])

    assert events(acme) == [("ann", None, "Login", earlier), ("ann", None, "Login", T0)]
    assert rollups(acme) == [("ann", None, "Login", DAY, 2, T0)]
    assert tallies(acme) == {(DAY, "Login"): 2}
    assert activity(acme) == [(["ann"], [])]
    assert seen(acme) == {"ann": (earlier, T0)}
    assert event_names(acme) == ["Login"]


def test_events_across_a_utc_midnight_fall_on_their_own_days(acme, store):
    midnight = T0 + timedelta(milliseconds=1)
    store(acme, [Track("ann", "Login", T0), Track("ann", "Login", midnight)])

    assert rollups(acme) == [
        ("ann", None, "Login", DAY, 1, T0),
        ("ann", None, "Login", NEXT_DAY, 1, midnight),
    ]
    assert tallies(acme) == {(DAY, "Login"): 1, (NEXT_DAY, "Login"): 1}
    assert seen(acme) == {"ann": (T0, midnight)}


def test_an_event_without_an_account_and_one_with_are_rolled_up_apart(acme, store):
    later = T0 - timedelta(minutes=1)
    # Ann's first event names no account and she is linked to none yet; her next batch's track
    # naming Initech links her (so it comes second: an event of the same batch would count for
    # Initech, her most recently linked account).
    store(
        acme,
        [Track("ann", "Login", later - timedelta(minutes=1))],
        [
            Track("ann", "Login", later, account="initech"),
            Track("bob", "Export", T0, account="initech"),
        ],
    )

    assert events(acme) == [
        ("ann", None, "Login", later - timedelta(minutes=1)),
        ("ann", "initech", "Login", later),
        ("bob", "initech", "Export", T0),
    ]
    assert rollups(acme) == [
        ("ann", None, "Login", DAY, 1, later - timedelta(minutes=1)),
        ("ann", "initech", "Login", DAY, 1, later),
        ("bob", "initech", "Export", DAY, 1, T0),
    ]
    assert tallies(acme) == {(DAY, "Login"): 2, (DAY, "Export"): 1}
    assert activity(acme) == [(["ann"], []), (["ann", "bob"], ["initech"])]


def test_a_name_with_a_tab_a_newline_and_a_backslash_is_stored_as_sent(acme, store):
    name = "Report\tCreated\nby C:\\Users\\ann\r"
    store(acme, [Track("ann", name, T0), Track("ann", name, T0)])

    assert events(acme) == [("ann", None, name, T0), ("ann", None, name, T0)]
    assert rollups(acme) == [("ann", None, name, DAY, 2, T0)]
    assert tallies(acme) == {(DAY, name): 2}
    assert event_names(acme) == [name]


def test_first_and_last_seen_move_both_ways_and_only_outwards(acme, store):
    store(acme, [Track("ann", "Login", T0 - timedelta(hours=2))])
    assert seen(acme) == {"ann": (T0 - timedelta(hours=2), T0 - timedelta(hours=2))}

    store(acme, [Track("ann", "Login", T0 - timedelta(days=3)), Track("ann", "Login", T0)])
    assert seen(acme) == {"ann": (T0 - timedelta(days=3), T0)}

    store(acme, [Track("ann", "Login", T0 - timedelta(days=1))])  # inside: nothing moves
    assert seen(acme) == {"ann": (T0 - timedelta(days=3), T0)}
    assert activity(acme) == [(["ann"], [])] * 3


def test_a_second_batch_adds_to_an_existing_rollup(acme, store):
    store(acme, [Track("ann", "Login", T0 - timedelta(minutes=5), account="initech")])
    store(
        acme,
        [
            Track("ann", "Login", T0 - timedelta(minutes=10), account="initech"),
            Track("ann", "Export", T0 - timedelta(minutes=10)),
        ],
    )
    # An earlier event leaves last_at where it was; the event naming no account counts for the
    # account Ann's first track linked her to.
    assert rollups(acme) == [
        ("ann", "initech", "Export", DAY, 1, T0 - timedelta(minutes=10)),
        ("ann", "initech", "Login", DAY, 2, T0 - timedelta(minutes=5)),
    ]

    store(acme, [Track("ann", "Login", T0, account="initech")])
    assert rollups(acme) == [
        ("ann", "initech", "Export", DAY, 1, T0 - timedelta(minutes=10)),
        ("ann", "initech", "Login", DAY, 3, T0),
    ]
    assert tallies(acme) == {(DAY, "Login"): 3, (DAY, "Export"): 1}
    assert activity(acme) == [(["ann"], ["initech"])] * 3
    assert seen(acme) == {"ann": (T0 - timedelta(minutes=10), T0)}
