"""A whole segment's refresh compares sets (PostgreSQL): when its members table looks empty to
the planner (a new install, a first fill), the statement that inserts the new members must not
scan that table once for each member it inserts, which made a first fill quadratic."""

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

from engagement.models import Segment, SegmentMember
from engagement.scoring import workspace_rescore
from engagement.segments import segment_refresh
from tests.engagement.helpers import apply, group, track

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

ACCOUNTS = 40


@pytest.fixture
def enterprise_accounts(acme):
    """Forty enterprise accounts, scored, and a members table the planner sees empty."""
    apply(
        acme,
        *(group(f"u{n}", f"acct-{n}", {"plan": "enterprise"}) for n in range(ACCOUNTS)),
        *(track(f"u{n}", "Login") for n in range(ACCOUNTS)),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE engagement_segmentmember, engagement_segmentmembershipchange")
        cursor.execute("ANALYZE engagement_segmentmember")
    return acme


@contextmanager
def join_plans() -> Iterator[list[str]]:
    """The plan of each statement that adds members, explained on the refresh's own cursor
    just before it runs (so with the settings it runs with)."""
    plans: list[str] = []

    def explained(execute, sql, params, many, context):
        if "INSERT INTO engagement_segmentmember " in sql:
            cursor = context["cursor"].cursor  # psycopg's own, past this wrapper
            cursor.execute("EXPLAIN " + sql, params)
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explained):
        yield plans


def enterprise_segment(tenant) -> Segment:
    return Segment.objects.create(
        workspace=tenant.workspace,
        name="Enterprise",
        target=Segment.Target.ACCOUNTS,
        conditions=[{"field": "trait:plan", "operator": "equals", "value": "enterprise"}],
    )


def nestloop() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW enable_nestloop")
        return cursor.fetchone()[0]


def test_a_first_fill_compares_sets_and_adds_every_member(enterprise_accounts):
    segment = enterprise_segment(enterprise_accounts)

    with join_plans() as plans:
        joined, left = segment_refresh(segment=segment)

    assert (joined, left) == (ACCOUNTS, 0)
    assert SegmentMember.objects.filter(segment=segment).count() == ACCOUNTS
    assert len(plans) == 1
    assert "Nested Loop" not in plans[0]
    assert "Anti Join" in plans[0]
    assert nestloop() == "on"  # as it was, for whatever the connection runs next


def test_a_refresh_among_a_few_ids_keeps_its_index_lookups(enterprise_accounts):
    segment = enterprise_segment(enterprise_accounts)
    segment_refresh(segment=segment)
    SegmentMember.objects.filter(segment=segment).delete()
    among = set(
        enterprise_accounts.product.accounts.order_by("id").values_list("id", flat=True)[:2]
    )

    with join_plans() as plans:
        joined, _ = segment_refresh(segment=segment, among=among)

    assert joined == 2
    assert len(plans) == 1
    assert "Nested Loop" in plans[0]
    assert nestloop() == "on"
