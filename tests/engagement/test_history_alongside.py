"""A history build's account points computed on a second connection (engagement/scoring/
alongside.py): each stored day is still what a rescore as of that day scored, a recompute of
stored days writes only what differs, and a caller's uncommitted events are never missed."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from engagement.history import score_history_update
from engagement.history_build import HistoryBuilder
from engagement.models import AccountScoreDay, UserScoreDay
from tests.engagement.helpers import apply, group, track
from tests.engagement.test_history import (
    assert_built_history_is_rescored,
    assert_short_ranges_store_the_same,
    day,
    hierarchy_activity,
    several_accounts_activity,
    stored_points,
)

# A second connection sees only committed rows: these tests commit theirs (PostgreSQL only).
pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


# Several accounts with a cap; a three-level hierarchy under an account filter.
each_activity = pytest.mark.parametrize(
    "activity",
    [
        lambda acme: several_accounts_activity(acme, cap=2),
        lambda acme: hierarchy_activity(acme, account_filter={"plan": "pro"}),
    ],
    ids=["several-accounts", "hierarchy"],
)


def means_computed_here(queries) -> int:
    """How many account means the job's own connection computed."""
    return sum("INSERT INTO eds_h_account_mean" in q["sql"] for q in queries)


def account_changes_computed_here(queries) -> int:
    """How many times the job's own connection summed the accounts' daily changes."""
    return sum("INSERT INTO eds_h_account_change" in q["sql"] for q in queries)


@each_activity
def test_every_day_built_alongside_equals_a_rescore_as_of_that_day(acme, settings, activity):
    settings.SCORING_ACCOUNTS_ALONGSIDE = True
    activity(acme)

    with CaptureQueriesContext(connection) as queries:
        expected = assert_built_history_is_rescored(
            acme.workspace, days=12, more_users_than=10, more_accounts_than=8
        )

    assert means_computed_here(queries) == 0
    # A recompute of eight stored days (one point wrong, one missing) rewrites just those two.
    workspace = acme.workspace
    UserScoreDay.objects.filter(workspace=workspace, day=day(5)).update(engagement_score=1)
    AccountScoreDay.objects.filter(workspace=workspace, day=day(3)).first().delete()
    with transaction.atomic():
        builder = HistoryBuilder(
            workspace=workspace,
            first=day(8),
            last=day(1),
            stored_until=day(1),
            own_transaction=True,
        )
        try:
            written = builder.build()
        finally:
            builder.close()
    assert written[1] == 1
    assert stored_points(workspace) == expected


@each_activity
def test_days_up_to_a_week_computed_alongside_store_the_same(acme, settings, activity):
    """The daily step and a recompute after late events (the path of up to a week) compute
    the accounts' own raw points on the second connection, their means (which need the users'
    days) in the job's session, and store what the full build does."""
    settings.SCORING_ACCOUNTS_ALONGSIDE = True
    activity(acme)
    expected = assert_built_history_is_rescored(
        acme.workspace, days=12, more_users_than=10, more_accounts_than=8
    )

    with CaptureQueriesContext(connection) as queries:
        assert_short_ranges_store_the_same(acme.workspace, expected, own_transaction=True)

    assert account_changes_computed_here(queries) == 0
    assert means_computed_here(queries) == 4  # the builds of 1, 2, 7 and 6 days


@pytest.mark.parametrize("history", ["never built", "built"])
def test_a_callers_uncommitted_events_count_for_their_accounts(acme, settings, history):
    """A rebuild (more than a week) or a recompute after late events (less) run in a caller's
    transaction: the account of an event that transaction added still gets its points."""
    settings.SCORING_ACCOUNTS_ALONGSIDE = True
    several_accounts_activity(acme, cap=None)
    if history == "built":
        score_history_update(workspace_id=acme.workspace.id)
    with transaction.atomic():
        apply(acme, group("u9", "z", {"plan": "pro"}), track("u9", "report", days_ago=3))
        result = score_history_update(workspace_id=acme.workspace.id)
        accounts = {a for (a, _day) in stored_points(acme.workspace)[1]}

    assert result.mode == ("rebuilt" if history == "never built" else "updated")
    assert acme.product.accounts.get(tracking_id="z").id in accounts
