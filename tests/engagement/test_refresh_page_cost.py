"""An incremental refresh prices a random page read as a cached one (SCORING_RANDOM_PAGE_COST,
PostgreSQL): the changed subjects' rollups and score rows it reads by index were just written.
A full rescore, which reads every row, keeps the server's price; so does every statement after
the refresh's transaction."""

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

from engagement.models import AccountScore, UserScore
from engagement.scoring import workspace_refresh, workspace_rescore
from tests.engagement.helpers import apply, group, track

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def scored_acme(acme):
    """Ada and Grace of Initech, scored."""
    apply(acme, group("ada", "initech"), group("grace", "initech"))
    apply(acme, track("ada", "Login"), track("grace", "Login", times=3))
    workspace_rescore(workspace_id=acme.workspace.id)
    return acme


def page_cost() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW random_page_cost")
        return cursor.fetchone()[0]


@contextmanager
def page_cost_as_members_are_summed() -> Iterator[list[str]]:
    """random_page_cost as the statement that sums each account's members runs (on the
    refresh's own connection in every mode: a full rescore aggregates accounts on a second
    one), read on the refresh's cursor just before it, so within its transaction."""
    seen: list[str] = []

    def shown(execute, sql, params, many, context):
        if "INSERT INTO eds_t_account_members" in sql:
            cursor = context["cursor"].cursor  # psycopg's own, past this wrapper
            cursor.execute("SHOW random_page_cost")
            seen.append(cursor.fetchone()[0])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(shown):
        yield seen


def test_an_incremental_refresh_reads_the_changes_at_the_cached_price(scored_acme):
    servers = page_cost()
    apply(scored_acme, track("ada", "Login", times=4))

    with page_cost_as_members_are_summed() as seen:
        result = workspace_refresh(workspace_id=scored_acme.workspace.id)

    assert result.mode == "incremental"
    assert seen == ["1.1"]
    assert page_cost() == servers  # SET LOCAL: gone with the refresh's transaction
    ada = UserScore.objects.get(workspace=scored_acme.workspace, user__tracking_id="ada")
    assert ada.raw_score == 5
    initech = AccountScore.objects.get(
        workspace=scored_acme.workspace, account__tracking_id="initech"
    )
    assert initech.total_users == 2


def test_a_full_rescore_keeps_the_servers_price(scored_acme):
    servers = page_cost()
    apply(scored_acme, track("grace", "Login"))

    with page_cost_as_members_are_summed() as seen:
        result = workspace_refresh(workspace_id=scored_acme.workspace.id, force_full=True)

    assert result.mode == "full"
    assert seen == [servers]


@pytest.mark.parametrize(("configured", "expected"), [(0.0, None), (2.5, "2.5")])
def test_the_price_is_a_setting_and_zero_keeps_the_servers(
    scored_acme, settings, configured, expected
):
    settings.SCORING_RANDOM_PAGE_COST = configured
    servers = page_cost()
    apply(scored_acme, track("ada", "Login"))

    with page_cost_as_members_are_summed() as seen:
        workspace_refresh(workspace_id=scored_acme.workspace.id)

    assert seen == [expected or servers]
