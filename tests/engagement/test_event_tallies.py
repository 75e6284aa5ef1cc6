"""The overview's event tallies: every stored batch adds its events per day and name, and the
compaction folds them into one row per key without changing a sum."""

from datetime import UTC, datetime

import pytest
from django.db.models import Sum

from engagement.event_store import event_tallies_compact
from engagement.models import EventDayTally, EventRollup
from tests.engagement.helpers import apply, group, ms, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def tallies(tenant) -> dict[tuple[str, str], int]:
    rows = (
        EventDayTally.objects.filter(product=tenant.product)
        .values("day", "event_name")
        .annotate(events=Sum("count"))
    )
    return {(row["day"].isoformat(), row["event_name"]): row["events"] for row in rows}


def rollup_sums(tenant) -> dict[tuple[str, str], int]:
    rows = (
        EventRollup.objects.filter(product=tenant.product)
        .values("day", "event_name")
        .annotate(events=Sum("count"))
    )
    return {(row["day"].isoformat(), row["event_name"]): row["events"] for row in rows}


def today() -> str:
    return datetime.fromtimestamp(ms(0) / 1000, UTC).date().isoformat()


def test_each_batch_adds_to_the_days_and_names_it_holds(acme, globex):
    apply(acme, group("ann", "initech"), track("ann", "Login", times=3, account="initech"))
    apply(acme, track("ann", "Login", days_ago=2), track("bob", "Export", times=2))
    apply(globex, track("gil", "Login", times=7))
    assert tallies(acme) == rollup_sums(acme)
    assert tallies(acme)[(today(), "Login")] == 3
    assert sum(tallies(acme).values()) == 6
    assert tallies(globex) == {(today(), "Login"): 7}


def test_compaction_folds_rows_and_keeps_every_sum(acme, globex):
    for _ in range(3):
        apply(acme, track("ann", "Login", times=2), track("bob", "Export"))
    apply(globex, track("gil", "Login"))
    before_acme, before_globex = tallies(acme), tallies(globex)
    assert EventDayTally.objects.filter(product=acme.product).count() == 6
    assert event_tallies_compact() == 4
    assert EventDayTally.objects.filter(product=acme.product).count() == 2
    assert (tallies(acme), tallies(globex)) == (before_acme, before_globex)
    # Nothing left to fold; a new batch appends again.
    assert event_tallies_compact() == 0
    apply(acme, track("ann", "Login"))
    assert tallies(acme)[(today(), "Login")] == 7
    assert EventDayTally.objects.filter(product=acme.product).count() == 3
