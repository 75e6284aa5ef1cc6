"""Features (adoption as the share of features used) and activation steps, hand-computed, on both
databases: stored adoption from the refresh, the per-record lists read a page at a time."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError

from engagement.activation import activation_progress
from engagement.features import features_used
from engagement.models import AccountScore, Feature, UserScore
from engagement.scoring import workspace_refresh, workspace_rescore
from engagement.workspace_config import workspace_config_apply, workspace_config_get
from tests.engagement.helpers import apply, group, identify, ms, track
from tests.engagement.test_scoring import configure

pytestmark = pytest.mark.both_databases

REPORTING = ["Report Created", "Report Shared"]
EXPORTS = ["Export CSV"]
ALERTS = ["Alert Set"]


def set_features(workspace, features: dict[str, list[str]]):
    document = workspace_config_get(workspace=workspace)
    document["features"] = features
    workspace_config_apply(workspace_id=workspace.id, document=document)


@pytest.fixture
def reporting_team(acme):
    """Ada used Reporting (twice, one of them excluded by weight) and Exports in the window and
    Alerts only 20 days ago (lookback 7); Bob used nothing but Login. Both are in account A."""
    configure(acme, lookback=7, weights={"Report Shared": 0})
    apply(
        acme,
        group("ada", "A"),
        group("bob", "A"),
        track("ada", "Report Shared", account="A"),
        track("ada", "Export CSV", days_ago=3, account="A"),
        track("ada", "Alert Set", days_ago=20, account="A"),
        track("bob", "Login", account="A"),
    )
    return acme


def test_adoption_without_features_is_the_share_of_weighted_names(reporting_team):
    workspace_rescore(workspace_id=reporting_team.workspace.id)
    ada = UserScore.objects.get(user__tracking_id="ada")
    # Weighted names the product sent: Export CSV, Alert Set, Login (Report Shared weighs 0).
    # Ada used Export CSV in the window: 1 of 3.
    assert round(ada.adoption, 4) == round(1 / 3, 4)


def test_adoption_with_features_is_the_share_of_features_used(reporting_team):
    workspace = reporting_team.workspace
    set_features(workspace, {"Reporting": REPORTING, "Exports": EXPORTS, "Alerts": ALERTS})
    workspace_rescore(workspace_id=workspace.id)
    scores = {s.user.tracking_id: s for s in UserScore.objects.select_related("user")}
    # Ada: Reporting (a weight of 0 still uses the feature) and Exports, not Alerts (too old).
    assert round(scores["ada"].adoption, 4) == round(2 / 3, 4)
    assert scores["bob"].adoption == 0  # Login belongs to no feature
    account = AccountScore.objects.get(account__tracking_id="A")
    assert round(account.adoption, 4) == round(2 / 3, 4)
    used = features_used(workspace=workspace, target="user", ids=[scores["ada"].user_id])
    assert [(u.feature, u.used) for u in used[scores["ada"].user_id]] == [
        ("Reporting", True),
        ("Exports", True),
        ("Alerts", False),
    ]
    used = features_used(workspace=workspace, target="account", ids=[account.account_id])
    assert [u.used for u in used[account.account_id]] == [True, True, False]


def test_changing_features_rescores_in_full_on_the_next_refresh(reporting_team):
    workspace = reporting_team.workspace
    workspace_rescore(workspace_id=workspace.id)
    set_features(workspace, {"Exports": EXPORTS})
    assert workspace_refresh(workspace_id=workspace.id).mode == "full"
    assert UserScore.objects.get(user__tracking_id="ada").adoption == 1.0


def test_an_event_belongs_to_at_most_one_feature(acme):
    document = workspace_config_get(workspace=acme.workspace)
    document["features"] = {"Reporting": REPORTING, "Sharing": ["Report Shared"], "Empty": []}
    with pytest.raises(ValidationError) as refused:
        workspace_config_apply(workspace_id=acme.workspace.id, document=document)
    assert refused.value.messages == [
        "features.Sharing[0]: 'Report Shared' is listed in 'Reporting' too; an event belongs to "
        "one feature",
        "features.Empty: a list of at least one event name",
    ]
    assert not Feature.objects.exists()


@pytest.fixture
def onboarding(acme):
    """Users: Signed Up and Invited Teammate events and a role trait. Accounts: Connected Repo
    (an event of any of its users) and a plan trait (its own or a user's)."""
    document = workspace_config_get(workspace=acme.workspace)
    document["activation"] = {
        "users": ["event:Signed Up", "event:Invited Teammate", "trait:role"],
        "accounts": ["event:Connected Repo", "trait:plan"],
    }
    workspace_config_apply(workspace_id=acme.workspace.id, document=document)
    apply(
        acme,
        group("ada", "A", days_ago=40),
        group("bob", "A", days_ago=40),
        group("cy", "B", {"plan": "pro"}, days_ago=12),
        identify("ada", {"role": "admin"}, days_ago=9),
        identify("bob", {"role": None}, days_ago=9),
        track("ada", "Signed Up", days_ago=35, account="A"),
        track("ada", "Signed Up", days_ago=2, account="A"),
        track("bob", "Connected Repo", days_ago=5, account="B"),
    )
    return acme


def day_start(days_ago: int) -> datetime:
    day = datetime.now(UTC).date() - timedelta(days=days_ago)
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def test_a_users_activation_is_the_share_of_steps_done(onboarding):
    ada = onboarding.product.users.get(tracking_id="ada")
    bob = onboarding.product.users.get(tracking_id="bob")
    found = activation_progress(workspace=onboarding.workspace, target="user", ids=[ada.id, bob.id])
    assert found[ada.id].share == pytest.approx(2 / 3)
    assert [(s.step, s.done, s.done_at) for s in found[ada.id].steps] == [
        ("event:Signed Up", True, day_start(35)),  # the first day it was sent
        ("event:Invited Teammate", False, None),
        ("trait:role", True, datetime.fromtimestamp(ms(9) / 1000, tz=UTC)),
    ]
    assert found[bob.id].share == 0.0  # a trait set to null is not set


def test_an_accounts_step_is_done_by_any_of_its_users_or_its_own_trait(onboarding):
    a = onboarding.product.accounts.get(tracking_id="A")
    b = onboarding.product.accounts.get(tracking_id="B")
    found = activation_progress(workspace=onboarding.workspace, target="account", ids=[a.id, b.id])
    # Bob (a user of A) connected a repo, though the event went to B; B's plan is its own trait.
    # That track named B, so it linked Bob to B too: B's step is done by him as well.
    assert [(s.step, s.done) for s in found[a.id].steps] == [
        ("event:Connected Repo", True),
        ("trait:plan", False),
    ]
    assert found[a.id].steps[0].done_at == day_start(5)
    assert found[a.id].share == 0.5
    assert found[b.id].share == 1.0
    assert [s.done for s in found[b.id].steps] == [True, True]


def test_without_steps_activation_is_none(acme):
    apply(acme, identify("ada", {"role": "admin"}))
    ada = acme.product.users.get(tracking_id="ada")
    found = activation_progress(workspace=acme.workspace, target="user", ids=[ada.id])
    assert (found[ada.id].share, found[ada.id].steps) == (None, [])


@pytest.mark.parametrize(
    ("activation", "fault"),
    [
        ({"users": ["Signed Up"]}, "activation.users[0]: a step, 'event:<name>' or"),
        ({"users": ["event:A", "event:A"]}, "activation.users[1]: 'event:A' is listed twice"),
        ({"teams": []}, "activation.teams: not a target; one of users, accounts"),
        ({"accounts": "trait:plan"}, "activation.accounts: a list of steps"),
    ],
)
def test_invalid_steps_are_refused_and_nothing_changes(acme, activation, fault):
    document = workspace_config_get(workspace=acme.workspace)
    before = dict(document)
    document["activation"] = activation
    with pytest.raises(ValidationError) as refused:
        workspace_config_apply(workspace_id=acme.workspace.id, document=document)
    assert any(message.startswith(fault) for message in refused.value.messages)
    assert workspace_config_get(workspace=acme.workspace) == before


def test_a_trait_step_takes_its_name_literally(acme):
    document = workspace_config_get(workspace=acme.workspace)
    document["activation"]["users"] = ["trait:0", "trait:a.b", "trait:2147483648"]
    workspace_config_apply(workspace_id=acme.workspace.id, document=document)
    apply(acme, identify("ada", {"0": "zero", "a.b": False, "2147483648": 1}))
    ada = acme.product.users.get(tracking_id="ada")
    found = activation_progress(workspace=acme.workspace, target="user", ids=[ada.id])
    assert [s.done for s in found[ada.id].steps] == [True, True, True]
