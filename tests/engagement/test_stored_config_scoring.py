"""No stored workspace setting stops scoring (issue 70): each odd value below is written straight
into the database, past the checks, and the rescore completes with the scores it should give."""

import pytest
from django.db import connection

from engagement.models import AccountScore, Feature, UserScore, Workspace
from engagement.scoring import workspace_rescore
from tests.engagement.helpers import apply, group, track

# Applies and scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


@pytest.fixture
def tenant(acme):
    """Ann (Initech, plan "pro") sent Login 3 times today; Bob (Umbrella) once."""
    apply(
        acme,
        group("ann", "initech", {"plan": "pro"}),
        group("bob", "umbrella", {"plan": "free"}),
        track("ann", "Login", times=3, account="initech"),
        track("bob", "Login", account="umbrella"),
    )
    return acme


def rescored(tenant) -> dict[str, float]:
    workspace_rescore(workspace_id=tenant.workspace.id)
    return dict(
        AccountScore.objects.filter(workspace=tenant.workspace).values_list(
            "account__tracking_id", "raw_score"
        )
    )


def store(tenant, **fields) -> None:
    Workspace.objects.filter(id=tenant.workspace.id).update(**fields)


@pytest.mark.parametrize("account_filter", [[1, 2], "plan", 5, True])
def test_an_account_filter_that_is_not_an_object_filters_nothing(tenant, account_filter):
    """As the reads apply it (engagement.stored_json.read_account_filter)."""
    store(tenant, account_filter=account_filter)
    assert rescored(tenant) == {"initech": 3.0, "umbrella": 1.0}


def test_an_account_filter_of_a_number_beyond_python_digits_admits_nobody(tenant):
    _raw_json(tenant, "account_filter", '{"plan": 1%s}' % ("0" * 5000))
    assert rescored(tenant) == {}


@pytest.mark.postgresql  # SQLite's JSON column refuses a document nested this deep
def test_an_account_filter_nested_beyond_json_loads_admits_nobody(tenant):
    _raw_json(tenant, "account_filter", '{"plan": %s}' % ("[" * 5000 + "]" * 5000))
    assert rescored(tenant) == {}


def test_a_daily_cap_of_0_counts_one_a_day(tenant):
    store(tenant, daily_event_cap=0)
    assert rescored(tenant) == {"initech": 1.0, "umbrella": 1.0}


def test_a_lookback_of_0_days_is_today(tenant):
    store(tenant, lookback_days=0)
    assert rescored(tenant) == {"initech": 3.0, "umbrella": 1.0}


@pytest.mark.parametrize("events", [5, "Login", [5, None, ["Login"], "x" * 300], {"Login": 1}])
def test_feature_events_that_are_not_event_names_are_skipped(tenant, events):
    """The feature is still one of the workspace's: adoption is 0 of 2 features used, not an
    error, and not a character of "Login" taken for an event."""
    Feature.objects.create(workspace=tenant.workspace, name="Logins", events=["Login"])
    odd = Feature.objects.create(workspace=tenant.workspace, name="Odd", events=["Other"])
    Feature.objects.filter(id=odd.id).update(events=events)
    assert rescored(tenant) == {"initech": 3.0, "umbrella": 1.0}
    ann = UserScore.objects.get(workspace=tenant.workspace, user__tracking_id="ann")
    assert ann.adoption == 0.5


def _raw_json(tenant, column: str, text: str) -> None:
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE engagement_workspace SET {column} = %s{cast} WHERE id = %s",  # noqa: S608
            [text, tenant.workspace.id],
        )
