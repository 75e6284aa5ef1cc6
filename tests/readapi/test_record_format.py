"""The record format every read API endpoint shares: timestamps, numbers, nulls, scored_at."""

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.utils import timezone

from engagement.models import Account, AccountScore, Segment, User, UserScore, Workspace
from engagement.scoring import workspace_rescore
from tests.engagement.helpers import apply, group, track
from tests.readapi.conftest import (
    add_account,
    add_segment,
    add_user,
    join,
    score_account,
    score_user,
    scored_peers,
)

pytestmark = pytest.mark.both_databases

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
ON_THE_SECOND = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)
PARIS = ZoneInfo("Europe/Paris")


def times_in(record: dict) -> dict[str, str]:
    """Every field of a record (and of its nested segments) that holds a time."""
    names = ("created_at", "updated_at", "joined_at", "last_seen", "first_seen", "scored_at")
    found = {name: record[name] for name in names if record.get(name) is not None}
    for n, segment in enumerate(record.get("segments", ())):
        found[f"segments[{n}].joined_at"] = segment["joined_at"]
    return found


def test_every_time_is_utc_with_microseconds_even_on_the_second(read, acme):
    account = add_account(acme, "acct_1")
    user = add_user(acme, "usr_1")
    Account.objects.filter(id=account.id).update(created_at=ON_THE_SECOND)
    User.objects.filter(id=user.id).update(first_seen_at=ON_THE_SECOND, last_seen_at=ON_THE_SECOND)
    # Stored in Paris time, served in UTC.
    score_account(acme.workspace, account, 40, last_seen=datetime(2026, 1, 5, 12, 0, tzinfo=PARIS))
    score_user(acme.workspace, user, 30)
    segment = add_segment(acme.workspace, "Engaged")
    join(segment, account=account, joined_at=ON_THE_SECOND)
    Workspace.objects.filter(id=acme.workspace.id).update(updated_at=ON_THE_SECOND)
    Segment.objects.filter(id=segment.id).update(created_at=ON_THE_SECOND)
    ws = {"workspace_id": acme.workspace.id}

    records = [
        read(acme, f"/v2/workspaces/{acme.workspace.id}").json(),
        read(acme, "/v2/accounts", expand="segments", **ws).json()["data"][0],
        read(acme, f"/v2/accounts/{account.id}", expand="segments").json(),
        read(acme, "/v1/accounts", id=account.id, **ws).json()["data"][0],
        read(acme, "/v2/users", **ws).json()["data"][0],
        read(acme, f"/v2/users/{user.id}").json(),
        read(acme, f"/v2/segments/{segment.id}").json(),
        read(acme, f"/v2/segments/{segment.id}/members").json()["data"][0],
    ]

    times = {
        f"{n}.{name}": value for n, r in enumerate(records) for name, value in times_in(r).items()
    }
    assert len(times) >= 16
    assert {name: value for name, value in times.items() if not TIMESTAMP.match(value)} == {}
    assert records[0]["updated_at"] == "2026-01-05T10:00:00.000000Z"
    assert records[1]["created_at"] == "2026-01-05T10:00:00.000000Z"
    assert records[1]["last_seen"] == "2026-01-05T11:00:00.000000Z"  # 12:00 in Paris
    assert records[1]["segments"][0]["joined_at"] == "2026-01-05T10:00:00.000000Z"
    assert records[5]["first_seen"] == "2026-01-05T10:00:00.000000Z"
    assert records[7]["joined_at"] == "2026-01-05T10:00:00.000000Z"


def test_whole_metrics_are_integers_and_fractions_have_fixed_decimals(read, acme):
    account = add_account(acme, "acct_1")
    score_account(
        acme.workspace,
        account,
        72,
        raw_score=31.0,
        previous_raw_score=40.0,
        adoption=1 / 3,
        active_user_share=2 / 3,
        score_breakdown=[{"event": "Report_Created", "count": 31, "weight": 1}],
    )

    scored_peers(acme, "account", [10, 80, 90])  # 1 of the 3 others scores lower: 33.33...

    record = read(acme, f"/v2/accounts/{account.id}").json()

    assert (record["raw_score"], record["previous_raw_score"]) == (31, 40)
    assert type(record["raw_score"]) is int and type(record["previous_raw_score"]) is int
    points = record["score_breakdown"][0]["points"]
    assert (points, type(points)) == (31, int)
    assert record["percentile_rank"] == 33.3
    assert record["adoption"] == 0.3333
    assert record["active_user_share"] == 0.6667


def test_fractions_round_half_up(read, acme):
    user = add_user(acme, "usr_1")
    score_user(acme.workspace, user, 10, adoption=0.12345, raw_score=2.5)

    record = read(acme, f"/v2/users/{user.id}").json()

    assert (record["adoption"], record["raw_score"]) == (0.1235, 3)


def test_previous_raw_score_is_served_wherever_records_are(read, acme):
    account = add_account(acme, "acct_1")
    user = add_user(acme, "usr_1", email="ada@acme.test")
    score_account(acme.workspace, account, 50, previous_raw_score=12.0)
    score_user(acme.workspace, user, 50, previous_raw_score=7.0)
    ws = {"workspace_id": acme.workspace.id}
    unscored = add_account(acme, "acct_new")

    assert read(acme, "/v2/accounts", **ws).json()["data"][0]["previous_raw_score"] == 12
    assert read(acme, f"/v2/accounts/{account.id}").json()["previous_raw_score"] == 12
    assert (
        read(acme, "/v1/accounts", id=account.id, **ws).json()["data"][0]["previous_raw_score"]
        == 12
    )
    assert read(acme, "/v2/users", **ws).json()["data"][0]["previous_raw_score"] == 7
    lookup = read(acme, "/v2/users", match_type="email", match_value="ada@acme.test", **ws)
    assert lookup.json()["data"][0]["previous_raw_score"] == 7
    assert read(acme, f"/v2/users/{user.id}").json()["previous_raw_score"] == 7
    assert read(acme, f"/v2/accounts/{unscored.id}").json()["previous_raw_score"] == 0


def test_an_unknown_email_is_null(read, acme):
    anonymous = add_user(acme, "usr_anonymous")
    known = add_user(acme, "usr_known", email="ada@acme.test")

    assert read(acme, f"/v2/users/{anonymous.id}").json()["email"] is None
    assert read(acme, f"/v2/users/{known.id}").json()["email"] == "ada@acme.test"
    listed = read(acme, "/v2/users", workspace_id=acme.workspace.id).json()["data"]
    assert [u["email"] for u in listed] == [None, "ada@acme.test"]


def test_scored_at_is_the_last_refresh_even_when_it_changed_nothing(read, acme):
    apply(acme, group("u1", "A"), track("u1", "Login", times=3))
    later = timezone.now()
    earlier = later - timedelta(seconds=1)
    workspace_rescore(workspace_id=acme.workspace.id, now=earlier)
    workspace_rescore(workspace_id=acme.workspace.id, now=later)
    user_row = UserScore.objects.get(workspace=acme.workspace)
    account_row = AccountScore.objects.get(workspace=acme.workspace)
    if connection.vendor == "postgresql":
        # The second rescore found the same values and left the rows as they were (SQLite
        # rewrites them, and the served time is the same either way).
        assert user_row.computed_at == account_row.computed_at == earlier

    expected = later.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    ws = {"workspace_id": acme.workspace.id}
    assert read(acme, f"/v2/users/{user_row.user_id}").json()["scored_at"] == expected
    assert read(acme, "/v2/users", **ws).json()["data"][0]["scored_at"] == expected
    assert read(acme, f"/v2/accounts/{account_row.account_id}").json()["scored_at"] == expected
    assert read(acme, "/v2/accounts", **ws).json()["data"][0]["scored_at"] == expected


def test_scored_at_of_a_row_written_after_the_last_refresh_is_its_own(read, acme):
    apply(acme, group("u1", "A"), track("u1", "Login"))
    workspace_rescore(workspace_id=acme.workspace.id, now=timezone.now() - timedelta(minutes=1))
    account = add_account(acme, "acct_imported")
    row = score_account(acme.workspace, account, 20)

    body = read(acme, f"/v2/accounts/{account.id}").json()

    assert body["scored_at"] == row.computed_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_points_that_are_not_a_usable_number_are_null(read, acme):
    account = add_account(acme, "acct_1")
    score = score_account(acme.workspace, account, 10)
    breakdown = (
        '[{"event": "A", "count": 1, "weight": 1, "points": "lots"},'
        f' {{"event": "B", "count": 1, "weight": 1, "points": {10**400}}}]'
    )
    with connection.cursor() as cursor:  # an old row in the object form, written as it was
        cursor.execute(
            "UPDATE engagement_accountscore SET score_breakdown = %s"
            " WHERE account_id = %s AND workspace_id = %s",
            [breakdown, score.account_id, score.workspace_id],
        )

    response = read(acme, f"/v2/accounts/{account.id}")

    assert response.status_code == 200
    assert [item["points"] for item in response.json()["score_breakdown"]] == [None, None]
