"""A full rescore's accounts aggregated on a second connection (engagement/scoring/alongside.py)
score exactly as when aggregated in the refresh's own session, and a caller's uncommitted rows
are never missed."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from engagement.scoring import workspace_rescore
from tests.engagement.helpers import apply, group, track
from tests.engagement.test_scoring import configure, snapshot

# A second connection sees only committed rows: these tests commit theirs (PostgreSQL only).
pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def two_accounts(acme):
    """Acme Co (pro) with Ann and Bob (Bob capped at 2 reports a day), Globex (free) under Acme
    Co with Cy."""
    configure(acme, cap=2, weights={"Report_Created": 3, "Viewed Page": 0})
    apply(
        acme,
        group("ann", "acme-co", {"plan": "pro"}),
        group("bob", "acme-co"),
        group("cy", "globex", {"plan": "free", "parent_group_id": "acme-co"}),
        track("ann", "Report_Created", times=2),
        track("ann", "Login", days_ago=3),
        track("bob", "Report_Created", times=5),
        track("bob", "Viewed Page"),
        track("cy", "Login", days_ago=9),
        track("cy", "Report_Created", days_ago=1, account="globex"),
    )
    return acme


def rescored(tenant, *, alongside: bool, settings) -> tuple[dict, list[str]]:
    """The workspace's scores after a full rescore, and the statements of the refresh's own
    connection that filled eds_t_account."""
    settings.SCORING_ACCOUNTS_ALONGSIDE = alongside
    with CaptureQueriesContext(connection) as queries:
        workspace_rescore(workspace_id=tenant.workspace.id)
    filled = [q["sql"] for q in queries if "INSERT INTO eds_t_account " in q["sql"]]
    return snapshot(tenant), filled


@pytest.mark.parametrize("account_filter", [None, {"plan": "pro"}], ids=["everyone", "filtered"])
def test_accounts_alongside_score_as_in_the_refresh_session(two_accounts, settings, account_filter):
    configure(two_accounts, cap=2, account_filter=account_filter)
    in_session, filled_here = rescored(two_accounts, alongside=False, settings=settings)
    # Rescored from nothing, so that every account row is written by the route under test.
    two_accounts.workspace.account_scores.all().delete()

    alongside, filled_alongside = rescored(two_accounts, alongside=True, settings=settings)

    assert alongside == in_session
    assert set(alongside["accounts"]) == ({"acme-co"} if account_filter else {"acme-co", "globex"})
    assert alongside["accounts"]["acme-co"][2] == 6 + 6 + 1 + 3  # capped, own and Globex's
    assert (len(filled_here), filled_alongside) == (1, [])


def test_a_callers_uncommitted_events_count_for_their_accounts(two_accounts, settings):
    settings.SCORING_ACCOUNTS_ALONGSIDE = True
    with transaction.atomic():
        apply(two_accounts, group("dee", "initech"), track("dee", "Report_Created"))
        workspace_rescore(workspace_id=two_accounts.workspace.id)
        scores = snapshot(two_accounts)

    assert scores["accounts"]["initech"][2] == 3
