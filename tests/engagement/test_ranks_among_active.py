"""Percentile ranks among the active (issue 71 §2): a subject scoring 0 has no rank (None), and
the others are ranked among the workspace's subjects scoring above 0 only, so that imported
empty accounts do not lift anyone's rank. Full rescore and incremental refresh give the same
ranks, read from the workspace's score histogram; the migration that once recomputed stored
ranks still migrates both ways."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from engagement.models import AccountScore
from engagement.scoring import workspace_refresh, workspace_rescore
from tests.engagement.helpers import apply, group, ranks, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

EMPTY_ACCOUNTS = 40


def account_ranks(tenant) -> dict[str, float | None]:
    return ranks(tenant, "account")


def user_ranks(tenant) -> dict[str, float | None]:
    return ranks(tenant, "user")


def empty_accounts(first: int, count: int) -> list:
    """Accounts imported with a user each and no event (an import of the customer list)."""
    return [group(f"e{n}", f"E{n}", {"name": f"Empty {n}"}) for n in range(first, first + count)]


@pytest.fixture
def acme_among_empty_accounts(acme):
    """Acme (ann: 3 logins) and Bolt (bob: 1 login) among 40 empty accounts: Acme 100, Bolt 36,
    the others 0."""
    apply(
        acme,
        group("ann", "acme", {"name": "Acme"}),
        group("bob", "bolt", {"name": "Bolt"}),
        *empty_accounts(0, EMPTY_ACCOUNTS),
        track("ann", "Login", times=3),
        track("bob", "Login"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    return acme


def test_empty_accounts_have_no_rank_and_lift_nobody(acme_among_empty_accounts):
    acme = acme_among_empty_accounts
    accounts = account_ranks(acme)
    # Among all 42 rows Bolt would rank above the 40 empty ones (97.6); among the active two it
    # is the lowest.
    assert (accounts.pop("acme"), accounts.pop("bolt")) == (100, 0)
    assert set(accounts.values()) == {None} and len(accounts) == EMPTY_ACCOUNTS
    users = user_ranks(acme)
    assert (users.pop("ann"), users.pop("bob")) == (100, 0)
    assert set(users.values()) == {None}


def test_the_only_active_account_ranks_as_a_workspace_of_one(acme):
    # The probe's case: one account with an event among hundreds imported empty read 98th
    # percentile. Ranked among the active alone it is the workspace's only ranked row: 0, as
    # a workspace of one ever was.
    apply(acme, group("ann", "acme"), *empty_accounts(0, 100), track("ann", "Login"))
    workspace_rescore(workspace_id=acme.workspace.id)
    accounts = account_ranks(acme)
    assert accounts.pop("acme") == 0
    assert set(accounts.values()) == {None}


def test_an_incremental_refresh_ranks_as_a_full_rescore(acme_among_empty_accounts, settings):
    acme = acme_among_empty_accounts
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    # A later import: 30 more empty accounts, and Cato (cy: 2 logins, p90 stays 2.8).
    apply(
        acme,
        *empty_accounts(EMPTY_ACCOUNTS, 30),
        group("cy", "cato", {"name": "Cato"}, days_ago=0),
        track("cy", "Login", times=2, days_ago=0),
    )
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "incremental"
    incremental = (account_ranks(acme), user_ranks(acme))
    accounts = dict(incremental[0])
    # Acme 100, Cato 71, Bolt 36: ranked among these three only.
    assert [accounts.pop(key) for key in ("acme", "cato", "bolt")] == [100, 50, 0]
    assert set(accounts.values()) == {None} and len(accounts) == EMPTY_ACCOUNTS + 30

    workspace_rescore(workspace_id=acme.workspace.id)
    assert (account_ranks(acme), user_ranks(acme)) == incremental


def test_the_admin_lists_show_no_rank_for_a_score_of_0(acme_among_empty_accounts, admin_client):
    page = admin_client.get(reverse("admin:engagement_account_changelist"), {"q": "Empty 1"})
    assert page.context["cl"].result_list
    assert '<td class="field-rank">–</td>' in page.content.decode()
    assert '<td class="field-rank">0</td>' not in page.content.decode()
    bolt = admin_client.get(reverse("admin:engagement_account_changelist"), {"q": "Bolt"})
    assert '<td class="field-rank">0</td>' in bolt.content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_migration_reranks_stored_rows_and_back():
    before = [("engagement", "0027_segment_broken")]
    old = migrated_to(before)
    product = old.get_model("engagement", "Product").objects.create(name="Acme")
    workspace = old.get_model("engagement", "Workspace").objects.create(
        product=product, name="Default"
    )
    users = old.get_model("engagement", "User")
    scores = old.get_model("engagement", "UserScore")
    # Ranked by the old rule among all three rows.
    for name, score, rank in (("ada", 71, 100), ("bob", 12, 50), ("cy", 0, 0)):
        user = users.objects.create(product=product, tracking_id=name)
        scores.objects.create(
            workspace=workspace, user=user, engagement_score=score, percentile_rank=rank
        )

    new = migrated_to([("engagement", "0028_percentile_rank_among_active")])
    ranked = new.get_model("engagement", "UserScore").objects
    assert dict(ranked.values_list("user__tracking_id", "percentile_rank")) == {
        "ada": 100,
        "bob": 0,
        "cy": None,
    }

    back = migrated_to(before).get_model("engagement", "UserScore").objects
    assert back.get(user__tracking_id="cy").percentile_rank == 0  # NOT NULL again
    migrated_to(MigrationExecutor(connection).loader.graph.leaf_nodes())


def migrated_to(target):
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    return MigrationExecutor(connection).loader.project_state(target).apps


def test_a_rank_moves_without_its_row_being_rewritten(acme_among_empty_accounts, settings):
    # Ranks are read from the workspace's histogram: a refresh rewrites only the rows it
    # recomputed, and the others' ranks move all the same.
    acme = acme_among_empty_accounts
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    # p90 kept between takes (as in a large workspace), so no score is re-normalised.
    settings.SCORING_P90_EXACT_USERS, settings.SCORING_P90_SECONDS = 0, 3600
    apply(acme, group("cy", "cato", days_ago=0), track("cy", "Login", times=2, days_ago=0))
    workspace_refresh(workspace_id=acme.workspace.id)
    cato = AccountScore.objects.get(workspace=acme.workspace, account__tracking_id="cato")
    assert account_ranks(acme)["cato"] == 50

    apply(acme, group("di", "dax", days_ago=0), track("di", "Login", times=2, days_ago=0))
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "incremental"

    # Cato and Dax tie above Bolt: one of the three others scores lower.
    accounts = account_ranks(acme)
    assert [accounts[key] for key in ("acme", "cato", "dax", "bolt")] == [100, 33.3, 33.3, 0]
    cato_now = AccountScore.objects.get(workspace=acme.workspace, account__tracking_id="cato")
    assert cato_now.computed_at == cato.computed_at
