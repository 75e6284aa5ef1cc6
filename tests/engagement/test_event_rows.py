"""Raw event rows on PostgreSQL carry no key and no index (migration 0023), yet every event gets
an id of its own, daily partitions are made without one, and deleting a user still takes its
events with it."""

from datetime import date

import pytest
from django.db import connection

from engagement.models import Event, User
from engagement.services import event_partitions_maintain
from tests.engagement.helpers import apply, track

pytestmark = pytest.mark.postgresql


def indexes(table: str) -> list[str]:
    """The names of the table's indexes, its primary key's included."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return sorted(name for name, details in found.items() if details["index"])


def test_raw_events_and_their_partitions_have_no_index(acme):
    event_partitions_maintain(today=date(2026, 11, 26))

    assert indexes("engagement_event") == []
    assert indexes("engagement_event_default") == []
    assert indexes("engagement_event_p20261126") == []


def test_each_event_gets_an_id_of_its_own_and_leaves_with_its_user(acme):
    apply(acme, track("ada", "Report_Created", times=2), track("bob", "Report_Created"))

    ids = list(Event.objects.values_list("id", flat=True))
    assert len(ids) == len(set(ids)) == 3

    User.objects.get(product=acme.product, tracking_id="ada").delete()

    assert list(Event.objects.values_list("user__tracking_id", flat=True)) == ["bob"]
