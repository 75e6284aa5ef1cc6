"""A full rescore's users shared with, and its accounts aggregated on, a second connection
(engagement/scoring/alongside.py) score exactly as when aggregated in the refresh's own session;
a caller's uncommitted rows are never missed, and an error there fails the rescore."""

import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from engagement.scoring import alongside, workspace_rescore
from engagement.scoring.alongside import UserRanges
from tests.engagement.helpers import apply, group, track
from tests.engagement.test_scoring import configure, snapshot

# A second connection sees only committed rows: these tests commit theirs (PostgreSQL only).
pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def two_accounts(acme):
    """Acme Co (pro) with Ann and Bob (Bob capped at 2 reports a day), Globex (free) under Acme
    Co with Cy, and Dee, in no account."""
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
        track("dee", "Login", times=4),
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


@pytest.fixture
def both_take_user_ranges(monkeypatch):
    """The refresh's own connection takes its first range of users only once the other has
    taken one, so that both aggregate users whatever the threads' timing; yields the ranges
    each took."""
    taken: dict[str, list] = {"job": [], "other": []}
    other_took = threading.Event()
    lowest, highest = UserRanges.lowest, UserRanges.highest

    def job_lowest(self):
        other_took.wait(10)
        ids = lowest(self)
        taken["job"].append(ids)
        return ids

    def other_highest(self):
        ids = highest(self)
        taken["other"].append(ids)
        other_took.set()
        return ids

    monkeypatch.setattr(UserRanges, "lowest", job_lowest)
    monkeypatch.setattr(UserRanges, "highest", other_highest)
    return taken


def test_users_shared_between_both_connections_score_as_in_the_refresh_session(
    two_accounts, settings, both_take_user_ranges
):
    settings.SCORING_ACCOUNTS_ALONGSIDE = False
    workspace_rescore(workspace_id=two_accounts.workspace.id)
    in_session = snapshot(two_accounts)
    two_accounts.workspace.user_scores.all().delete()
    two_accounts.workspace.account_scores.all().delete()

    settings.SCORING_ACCOUNTS_ALONGSIDE = True
    workspace_rescore(workspace_id=two_accounts.workspace.id)

    assert snapshot(two_accounts) == in_session
    assert set(in_session["users"]) == {"ann", "bob", "cy", "dee"}
    job = [ids for ids in both_take_user_ranges["job"] if ids]
    other = [ids for ids in both_take_user_ranges["other"] if ids]
    assert job and other  # both aggregated users, no range twice
    assert not set(job) & set(other)


def test_an_error_on_the_other_connection_fails_the_rescore(
    two_accounts, settings, monkeypatch, both_take_user_ranges
):
    settings.SCORING_ACCOUNTS_ALONGSIDE = False
    workspace_rescore(workspace_id=two_accounts.workspace.id)
    before = snapshot(two_accounts)
    settings.SCORING_ACCOUNTS_ALONGSIDE = True
    aggregate_into = alongside.users_aggregate_into

    def failing_there(run, ids):
        if threading.current_thread().name.startswith("scoring-alongside"):
            raise RuntimeError("the other connection failed")
        aggregate_into(run, ids)

    monkeypatch.setattr(alongside, "users_aggregate_into", failing_there)
    configure(two_accounts, cap=5)  # a full rescore due, every score to move

    with pytest.raises(RuntimeError, match="the other connection failed"):
        workspace_rescore(workspace_id=two_accounts.workspace.id)

    assert snapshot(two_accounts) == before  # the rescore's writes rolled back


def test_user_ranges_cover_the_ids_once_from_both_ends():
    ranges = UserRanges((10, 107), parts=4)

    taken = [ranges.lowest(), ranges.highest(), ranges.lowest(), ranges.highest()]

    assert taken == [(10, 35), (85, 107), (35, 60), (60, 85)]
    assert (ranges.lowest(), ranges.highest()) == (None, None)
    assert UserRanges(None).lowest() is None
