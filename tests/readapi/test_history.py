"""GET /v2/accounts/{id}/history and /v2/users/{id}/history: daily points, oldest first, today
last and equal to the record's score; the other reads' auth, scoping, 404s and error body."""

from datetime import UTC, datetime, timedelta

import pytest

from engagement.history import score_history_update
from engagement.models import Account, EventRollup, User
from engagement.scoring import workspace_rescore
from tests.engagement.helpers import apply, group, track
from tests.engagement.test_scoring import configure

pytestmark = pytest.mark.both_databases


def day(days_ago: int) -> str:
    return (datetime.now(UTC).date() - timedelta(days=days_ago)).isoformat()


@pytest.fixture
def acme_history(acme):
    """Lookback 7. Ada reports 4 times ten days ago, Bob once a day from ten days ago to today;
    both in account Acme Corp, whose events these are. History built, scores live."""
    configure(acme, lookback=7)
    apply(
        acme,
        group("ada", "acme-corp"),
        group("bob", "acme-corp"),
        track("ada", "report", days_ago=10, times=4, account="acme-corp"),
        *(track("bob", "report", days_ago=k, account="acme-corp") for k in range(11)),
    )
    EventRollup.objects.update(updated_at=datetime.now(UTC) - timedelta(hours=1))
    workspace_rescore(workspace_id=acme.workspace.id)
    score_history_update(workspace_id=acme.workspace.id)
    return {
        "workspace": acme.workspace.id,
        "account": Account.objects.get(product=acme.product, tracking_id="acme-corp").id,
        "ada": User.objects.get(product=acme.product, tracking_id="ada").id,
        "bob": User.objects.get(product=acme.product, tracking_id="bob").id,
    }


def test_an_accounts_history_is_daily_oldest_first_and_ends_with_its_score(
    read, acme, acme_history
):
    ids = acme_history
    response = read(
        acme, f"/v2/accounts/{ids['account']}/history", workspace_id=ids["workspace"], days=12
    )

    assert response.status_code == 200
    points = response.json()["data"]
    assert [p["date"] for p in points] == [day(k) for k in range(11, -1, -1)]
    # Mean of Ada's and Bob's scores each day (see tests/engagement/test_history.py).
    assert [p["engagement_score"] for p in points] == [
        0,
        64,
        77,
        89,
        100,
        91,
        85,
        80,
        50,
        50,
        50,
        50,
    ]
    assert [p["raw_score"] for p in points] == [0, 5, 6, 7, 8, 9, 10, 11, 7, 7, 7, 7]
    record = read(acme, f"/v2/accounts/{ids['account']}", workspace_id=ids["workspace"]).json()
    assert points[-1]["engagement_score"] == record["engagement_score"]
    assert points[-1]["raw_score"] == record["raw_score"]
    assert all(type(p["raw_score"]) is int for p in points)  # whole, as in the records


def test_a_users_history_shows_a_user_gone_quiet_decaying(read, acme, acme_history):
    ids = acme_history
    response = read(acme, f"/v2/users/{ids['ada']}/history", workspace_id=ids["workspace"])

    assert response.status_code == 200
    points = response.json()["data"]
    assert len(points) == 30 and points[-1]["date"] == day(0)
    assert [p["engagement_score"] for p in points[-12:]] == [
        0, 100, 100, 100, 100, 82, 69, 60, 0, 0, 0, 0
    ]  # fmt: skip
    record = read(acme, f"/v2/users/{ids['ada']}", workspace_id=ids["workspace"]).json()
    assert points[-1]["engagement_score"] == record["engagement_score"] == 0


@pytest.mark.parametrize("path", ["/v2/accounts/{account}/history", "/v2/users/{bob}/history"])
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "workspace_id"),
        ({"workspace_id": "abc"}, "workspace_id"),
        ({"workspace_id": "{workspace}", "days": "0"}, "days"),
        ({"workspace_id": "{workspace}", "days": "366"}, "days"),
        ({"workspace_id": "{workspace}", "days": "a week"}, "days"),
    ],
)
def test_parameters_out_of_range_are_400_with_the_field(
    read, acme, acme_history, path, params, field
):
    query = {key: value.format(**acme_history) for key, value in params.items()}
    response = read(acme, path.format(**acme_history), **query)

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_parameters"
    assert list(body["fields"]) == [field]


@pytest.mark.parametrize("path", ["/v2/accounts/{account}/history", "/v2/users/{bob}/history"])
def test_a_year_is_the_longest_history(read, acme, acme_history, path):
    response = read(
        acme, path.format(**acme_history), workspace_id=acme_history["workspace"], days=365
    )

    assert response.status_code == 200
    assert len(response.json()["data"]) == 365


@pytest.mark.parametrize("path", ["/v2/accounts/{account}/history", "/v2/users/{bob}/history"])
def test_another_products_token_gets_404_never_data(read, acme, globex, acme_history, path):
    url = path.format(**acme_history)

    # Its own workspace with Acme's record, and Acme's workspace: both unknown to Globex.
    for workspace_id in (globex.workspace.id, acme_history["workspace"]):
        response = read(globex, url, workspace_id=workspace_id)
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"


def test_acme_reading_with_another_products_workspace_gets_404(read, acme, globex, acme_history):
    url = f"/v2/accounts/{acme_history['account']}/history"

    response = read(acme, url, workspace_id=globex.workspace.id)

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_an_unknown_id_is_404_and_no_token_is_401(read, acme, acme_history):
    workspace = acme_history["workspace"]

    assert read(acme, "/v2/users/999999/history", workspace_id=workspace).status_code == 404
    response = read(None, f"/v2/users/{acme_history['bob']}/history", workspace_id=workspace)
    assert response.status_code == 401
    assert set(response.json()) >= {"code", "message"}
