"""The whole-workspace figures each score refresh keeps (users, accounts, the active ones, accounts
per score) equal a fresh count after full and incremental refreshes, as users turn active or
inactive, accounts change band or leave the filter, and users are erased."""

from datetime import timedelta

import pytest
from django.utils import timezone

from engagement.models import (
    Account,
    AccountScore,
    ScoringState,
    User,
    UserScore,
)
from engagement.scoring import workspace_refresh, workspace_rescore
from engagement.selectors import workspace_stats
from engagement.traits import accounts_admitted
from tests.engagement.helpers import apply, erase, group, identify, track
from tests.engagement.test_scoring import configure

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def counted(workspace) -> dict:
    """The figures counted row by row, as the overview used to on each visit."""
    users = UserScore.objects.filter(workspace=workspace)
    accounts = AccountScore.objects.filter(workspace=workspace)
    scores = [0] * 101
    for score in accounts.values_list("engagement_score", flat=True):
        scores[score] += 1
    product_accounts = accounts_admitted(
        Account.objects.filter(product_id=workspace.product_id), workspace.account_filter
    )
    unscored = product_accounts.exclude(scores__workspace=workspace).count()
    return {
        "users": max(User.objects.filter(product_id=workspace.product_id).count(), users.count()),
        "accounts": accounts.count() + unscored,
        "active_users": users.filter(events_in_window__gt=0).count(),
        "active_accounts": accounts.filter(active_users__gt=0).count(),
        "account_scores": tuple(scores),
        "scored": (users.count(), accounts.count()),
    }


def kept(workspace) -> dict:
    stats = workspace_stats(workspace=workspace)
    state = ScoringState.objects.get(workspace=workspace)
    return {
        "users": stats.users,
        "accounts": stats.accounts,
        "active_users": stats.active_users,
        "active_accounts": stats.active_accounts,
        "account_scores": stats.account_scores,
        "scored": (state.scored_users, state.scored_accounts),
    }


def account_score(tenant, tracking_id: str) -> int:
    return AccountScore.objects.get(
        workspace=tenant.workspace, account__tracking_id=tracking_id
    ).engagement_score


def test_full_and_incremental_refreshes_keep_the_figures_a_fresh_count_gives(acme):
    workspace = configure(acme, lookback=7)
    apply(
        acme,
        group("ann", "initech"),
        group("bob", "initech"),
        group("cy", "umbrella"),
        identify("dee", {"email": "dee@example.com"}),
        track("ann", "Report_Created", times=6, account="initech"),
        track("bob", "Login", days_ago=2, account="initech"),
        track("cy", "Login", times=3, account="umbrella"),
    )
    assert workspace_rescore(workspace_id=workspace.id).mode == "full"
    assert kept(workspace) == counted(workspace)
    assert kept(workspace)["active_users"] == 3
    before = {name: account_score(acme, name) for name in ("initech", "umbrella")}

    # A heavy new user moves p90: every other score, and so the accounts' bands, move with it.
    # Dee (no events yet) is scored and stays inactive; Eve's new account is scored too.
    apply(
        acme,
        group("eve", "hooli"),
        track("eve", "Report_Created", times=60, account="hooli"),
        track("dee", "Login"),
    )
    assert workspace_refresh(workspace_id=workspace.id).mode == "incremental"
    after = {name: account_score(acme, name) for name in ("initech", "umbrella")}
    assert after != before
    assert kept(workspace) == counted(workspace)
    assert kept(workspace)["active_users"] == 5

    # A week later every event has left the window: everyone is inactive.
    later = timezone.now() + timedelta(days=8)
    assert workspace_refresh(workspace_id=workspace.id, now=later).mode == "full"
    figures = kept(workspace)
    assert figures == counted(workspace)
    assert (figures["active_users"], figures["active_accounts"]) == (0, 0)
    assert figures["account_scores"][0] == 3


def test_users_and_accounts_not_scored_yet_are_counted_as_they_arrive(acme):
    workspace = configure(acme, lookback=7)
    apply(acme, group("ann", "initech"), track("ann", "Login", account="initech"))
    workspace_rescore(workspace_id=workspace.id)
    apply(acme, group("bob", "umbrella"), identify("cy", {"email": "cy@example.com"}))

    figures = kept(workspace)
    assert (figures["users"], figures["accounts"]) == (3, 2)
    assert figures["scored"] == (1, 1)
    assert figures == counted(workspace)


def test_an_account_leaving_the_filter_leaves_the_figures(acme):
    workspace = configure(acme, lookback=7, account_filter={"plan": "pro"})
    apply(
        acme,
        group("ann", "initech", {"plan": "pro"}),
        group("bob", "umbrella", {"plan": "pro"}),
        group("cy", "hooli", {"plan": "free"}),
        track("ann", "Login", times=4, account="initech"),
        track("bob", "Login", account="umbrella"),
    )
    workspace_rescore(workspace_id=workspace.id)
    assert kept(workspace) == counted(workspace)
    assert kept(workspace)["scored"] == (2, 2)

    apply(acme, group("bob", "umbrella", {"plan": "free"}, days_ago=0))
    assert workspace_refresh(workspace_id=workspace.id).mode == "incremental"
    figures = kept(workspace)
    assert figures == counted(workspace)
    assert (figures["accounts"], figures["active_accounts"]) == (1, 1)


def test_an_erased_user_leaves_the_figures_at_the_next_refresh(acme):
    """Erasure deletes the score rows itself and asks for a full rescore: the kept figures
    count the user until that refresh has run."""
    workspace = configure(acme, lookback=7)
    apply(
        acme,
        group("ann", "initech"),
        group("bob", "initech"),
        track("ann", "Login", account="initech"),
        track("bob", "Login", account="initech"),
    )
    workspace_rescore(workspace_id=workspace.id)
    bob = User.objects.get(product=acme.product, tracking_id="bob")
    erase(acme, bob)
    assert kept(workspace)["active_users"] == 2

    assert workspace_refresh(workspace_id=workspace.id).mode == "full"
    figures = kept(workspace)
    assert figures == counted(workspace)
    assert (figures["users"], figures["active_users"]) == (1, 1)
