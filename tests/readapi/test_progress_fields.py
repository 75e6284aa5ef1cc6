"""activation, activation_steps and features on account and user records, hand-computed, on the
list and the single record (read a page at a time)."""

from datetime import UTC, datetime, timedelta

import pytest

from engagement.scoring import workspace_rescore
from engagement.workspace_config import workspace_config_apply, workspace_config_get
from tests.engagement.helpers import apply, group, identify, track

pytestmark = pytest.mark.both_databases


@pytest.fixture
def onboarded(acme):
    """Ann and Bo of account A. Steps: users Signed Up and a role; accounts Connected Repo and a
    plan. Features: Reporting (Report Created) and Alerts (Alert Set). Ann signed up 3 days ago
    and made a report today; Bo has a role; A has no plan."""
    document = workspace_config_get(workspace=acme.workspace)
    document["activation"] = {
        "users": ["event:Signed Up", "trait:role"],
        "accounts": ["event:Connected Repo", "trait:plan"],
    }
    document["features"] = {"Reporting": ["Report Created"], "Alerts": ["Alert Set"]}
    workspace_config_apply(workspace_id=acme.workspace.id, document=document)
    apply(
        acme,
        group("ann", "A", {"name": "Acme"}),
        group("bo", "A"),
        identify("bo", {"role": "viewer"}),
        track("ann", "Signed Up", days_ago=3, account="A"),
        track("ann", "Report Created", account="A"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    return acme


def test_user_records_carry_activation_and_features(read, onboarded):
    listed = read(onboarded, "/v2/users", workspace_id=onboarded.workspace.id).json()["data"]
    users = {u["tracking_id"]: u for u in listed}
    signed_up = datetime.now(UTC).date() - timedelta(days=3)
    assert users["ann"]["activation"] == 0.5
    assert users["ann"]["activation_steps"] == [
        {"step": "event:Signed Up", "done": True, "done_at": f"{signed_up}T00:00:00.000000Z"},
        {"step": "trait:role", "done": False, "done_at": None},
    ]
    assert users["ann"]["features"] == [
        {"feature": "Reporting", "used": True},
        {"feature": "Alerts", "used": False},
    ]
    assert users["ann"]["adoption"] == 0.5  # one feature of two
    assert users["bo"]["activation"] == 0.5
    assert [s["done"] for s in users["bo"]["activation_steps"]] == [False, True]
    one = read(onboarded, f"/v2/users/{users['ann']['id']}", workspace_id=onboarded.workspace.id)
    body = one.json()
    assert (body["activation"], body["features"]) == (0.5, users["ann"]["features"])


def test_account_records_carry_activation_and_features(read, onboarded):
    (acme,) = read(onboarded, "/v2/accounts", workspace_id=onboarded.workspace.id).json()["data"]
    assert acme["activation"] == 0.0
    assert [s["step"] for s in acme["activation_steps"]] == ["event:Connected Repo", "trait:plan"]
    assert acme["features"] == [
        {"feature": "Reporting", "used": True},
        {"feature": "Alerts", "used": False},
    ]
    assert acme["adoption"] == 0.5


def test_without_configuration_the_fields_are_empty(read, acme):
    apply(acme, group("ann", "A"), track("ann", "Login", account="A"))
    workspace_rescore(workspace_id=acme.workspace.id)
    (ann,) = read(acme, "/v2/users", workspace_id=acme.workspace.id).json()["data"]
    assert (ann["activation"], ann["activation_steps"], ann["features"]) == (None, [], [])
    assert ann["adoption"] == 1.0  # the one weighted name, used
