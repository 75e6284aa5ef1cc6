"""The formula in Python (engagement.scoring.formula) and in SQL (engagement.scoring.dialect) on
the same cases, on whichever database the suite runs: the scores and tenures users see come
from the SQL, the Python functions serve unscored subjects and the score history."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from engagement.models import User, UserScore
from engagement.scoring import (
    Dialect,
    round_half_up,
    score_from_raw,
    tenure_days,
    workspace_rescore,
)
from engagement.selectors import read_traits
from tests.engagement.helpers import apply, identify

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

SCORE_CASES = [
    # raw, p90, score
    (0, 10, 0),  # no activity
    (5, 0, 0),  # no p90 yet
    (30, 10, 100),  # above p90: capped
    (10, 10, 100),  # at p90
    (1, 200, 1),  # 0.5 rounds up to 1
    (1, 1000, 1),  # 0.1 is still at least 1
    (3, 8, 38),  # 37.5
    # 100 x 23 / 36.8 = 62.5 exactly, but interpolation computes 36.8 as 36.800000000000004 (or,
    # in PostgreSQL over other values, 36.80000000000007): the ratio falls a hair below 62.5.
    (23, 36.800000000000004, 63),
    (23, 36.80000000000007, 63),
    (125, 200.0000008, 62),  # 62.49999975 really is below the half
    (7, 10.5, 67),
    (2, 3, 67),  # 66.666...
]


def sql_value(expression: str, params: dict) -> object:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {expression}", params)  # noqa: S608 - built from fixed snippets
        return cursor.fetchone()[0]


@pytest.mark.django_db
@pytest.mark.parametrize(("raw", "p90", "score"), SCORE_CASES)
def test_score_from_raw_and_its_sql_agree(raw, p90, score):
    sql = Dialect(connection.vendor)
    as_float = f"CAST(%(raw)s AS {sql.float})", f"CAST(%(p90)s AS {sql.float})"
    expression = sql.score(*as_float)

    assert score_from_raw(raw=raw, p90=p90) == score
    assert int(sql_value(expression, {"raw": raw, "p90": p90})) == score


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("value", "rounded"),
    [(0.5, 1), (1.5, 2), (2.4999999999, 3), (62.49999999999999, 63), (62.4999998, 62), (7, 7)],
)
def test_round_half_up_and_its_sql_agree(value, rounded):
    sql = Dialect(connection.vendor)
    expression = sql.round_half_up(f"CAST(%(value)s AS {sql.float})")

    assert round_half_up(value) == rounded
    assert int(sql_value(expression, {"value": value})) == rounded


def days_ago(days: int) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).date().isoformat()


def tenure_cases() -> dict[str, tuple[dict, int, int]]:
    """user: (traits, first seen days ago, expected tenure), the dates from today's (a module
    constant, made when the tests are collected, is a day off past midnight)."""
    return {
        "date": ({"createdAt": days_ago(100)}, 5, 100),
        "datetime_with_offset": ({"createdAt": f"{days_ago(100)}T23:30:00-05:00"}, 5, 100),
        "snake_case": ({"created_at": days_ago(30)}, 5, 30),
        "null_then_snake_case": ({"createdAt": None, "created_at": days_ago(30)}, 5, 30),
        "unix_ms": ({"createdAt": 1_600_000_000_000}, 4, 4),  # not a date: first seen instead
        "impossible_date": ({"createdAt": "2024-02-31"}, 3, 3),
        "not_a_date": ({"createdAt": "last spring"}, 3, 3),
        "future": ({"createdAt": days_ago(-10)}, 3, 0),
        "no_trait": ({"name": "N"}, 7, 7),
    }


@pytest.mark.django_db
def test_tenure_is_the_same_in_python_and_in_a_full_rescore(acme):
    cases = tenure_cases()
    apply(
        acme,
        *(identify(user, traits, days_ago=seen) for user, (traits, seen, _) in cases.items()),
    )

    workspace_rescore(workspace_id=acme.workspace.id)

    for user in User.objects.filter(product=acme.product):
        stored = UserScore.objects.get(workspace=acme.workspace, user=user).tenure_days
        computed = tenure_days(traits=read_traits(user), first_seen=user.first_seen_at)
        expected = cases[user.tracking_id][2]
        assert (user.tracking_id, stored, computed) == (user.tracking_id, expected, expected)
