"""Automations fire when a subject enters their condition in a score refresh, once."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from automations.models import Automation, AutomationFiring, AutomationSubjectState, Delivery
from automations.services import automation_create
from engagement.models import Account, AccountScore, Segment, Workspace
from engagement.scoring import workspace_refresh
from tests.engagement.helpers import apply, group, track

pytestmark = pytest.mark.both_databases


@pytest.fixture
def scored_acme(acme):
    """Acme scored once: Initech active, Hooli quiet (first scoring fires nothing)."""
    apply(acme, group("ann", "initech"), track("ann", "Report", times=20, account="initech"))
    apply(acme, group("bob", "hooli"), track("bob", "Report", times=1, account="hooli"))
    workspace_refresh(workspace_id=acme.workspace.id)
    return acme


def _refresh(tenant):
    return workspace_refresh(workspace_id=tenant.workspace.id)


def _globodyne_arrives_busy(tenant) -> None:
    """Cat joins a new account, Globodyne, and uses the product heavily: its score jumps."""
    apply(
        tenant,
        group("cat", "globodyne"),
        track("cat", "Report", times=30, account="globodyne"),
    )


def _fired(automation) -> list[str]:
    return sorted(
        d.payload["data"][automation.subject_kind]["tracking_id"]
        for d in Delivery.objects.filter(automation=automation)
    )


def test_a_new_account_scoring_up_fires_score_changed_once(scored_acme, receiver):
    automation = automation_create(
        workspace=scored_acme.workspace,
        trigger="score_changed",
        threshold=10,
        url=receiver.url,
    )
    _globodyne_arrives_busy(scored_acme)
    _refresh(scored_acme)
    assert _fired(automation) == ["globodyne"]
    delivery = Delivery.objects.get(automation=automation)
    assert delivery.event_type == "account.score_changed"
    body = delivery.payload
    assert body["type"] == "account.score_changed"
    account = body["data"]["account"]
    assert account["score_change"] >= 10 and account["engagement_score"] > 0
    assert account["_links"]["dashboard"].endswith(f"/accounts/{account['id']}/")
    assert body["data"]["automation"] == {"id": automation.id, "name": automation.name}
    # Staying in the condition fires nothing more.
    apply(scored_acme, track("cat", "Report", times=5, account="globodyne"))
    _refresh(scored_acme)
    assert _fired(automation) == ["globodyne"]


def test_subjects_already_in_the_condition_when_it_is_made_do_not_fire(scored_acme, receiver):
    automation = automation_create(
        workspace=scored_acme.workspace,
        trigger="score_changed",
        threshold=10,
        url=receiver.url,
    )
    apply(scored_acme, track("ann", "Report", times=3, account="initech"))
    _refresh(scored_acme)
    assert _fired(automation) == []  # Initech was already up 10 or more


def test_the_first_scoring_of_a_workspace_fires_nothing(acme, receiver):
    automation = automation_create(
        workspace=acme.workspace, trigger="band_entered", url=receiver.url
    )
    new = automation_create(workspace=acme.workspace, trigger="new_account", url=receiver.url)
    apply(acme, group("ann", "initech"), track("ann", "Report", times=20, account="initech"))
    workspace_refresh(workspace_id=acme.workspace.id)
    assert Delivery.objects.count() == 0
    _refresh(acme)  # and the accounts seen then are not "new" on the next one
    assert _fired(automation) == [] and _fired(new) == []


def test_a_settings_change_that_moves_every_score_fires_nothing(scored_acme, receiver):
    automation = automation_create(
        workspace=scored_acme.workspace, trigger="band_entered", url=receiver.url
    )
    workspace = Workspace.objects.get(id=scored_acme.workspace.id)
    workspace.weights.create(event_name="Report", weight=10)
    workspace.lookback_days = 7
    workspace.save()
    result = _refresh(scored_acme)
    assert result.mode == "full"
    assert _fired(automation) == []


def test_band_entered_fires_for_the_band_named(scored_acme, receiver):
    automation = automation_create(
        workspace=scored_acme.workspace,
        trigger="band_entered",
        threshold=75,
        url=receiver.url,
    )
    apply(scored_acme, track("bob", "Report", times=40, account="hooli"))
    _refresh(scored_acme)
    assert _fired(automation) == ["hooli"]


def test_new_account_fires_for_an_account_made_after_the_automation(scored_acme, receiver):
    automation = automation_create(
        workspace=scored_acme.workspace, trigger="new_account", url=receiver.url
    )
    apply(scored_acme, group("dan", "umbrella"), track("dan", "Login", account="umbrella"))
    _refresh(scored_acme)
    apply(scored_acme, track("dan", "Login", account="umbrella"))
    _refresh(scored_acme)
    assert _fired(automation) == ["umbrella"]
    assert Delivery.objects.get(automation=automation).event_type == "account.created"


def test_segment_entered_and_left(scored_acme, receiver):
    segment = Segment.objects.create(
        workspace=scored_acme.workspace,
        name="Hot",
        target="accounts",
        conditions=[{"field": "metric:engagement_score", "operator": "greater_than", "value": 60}],
    )
    _refresh(scored_acme)
    entered = automation_create(
        workspace=scored_acme.workspace,
        trigger="segment_entered",
        segment=segment,
        url=receiver.url,
    )
    left = automation_create(
        workspace=scored_acme.workspace,
        trigger="segment_left",
        segment=segment,
        url=receiver.url,
    )
    apply(scored_acme, track("bob", "Report", times=60, account="hooli"))
    _refresh(scored_acme)
    assert _fired(entered) == ["hooli"]
    assert "initech" in _fired(left)  # Hooli's rise moved the p90: Initech fell below 60


def test_conditions_limit_who_fires_all_or_any(scored_acme, receiver):
    only_big = automation_create(
        workspace=scored_acme.workspace,
        trigger="new_account",
        url=receiver.url,
        conditions=[{"field": "trait:mrr", "operator": "greater_than", "value": 100000}],
    )
    either = automation_create(
        workspace=scored_acme.workspace,
        trigger="new_account",
        url=receiver.url,
        match="any",
        conditions=[
            {"field": "trait:mrr", "operator": "greater_than", "value": 100000},
            {"field": "trait:plan", "operator": "equals", "value": "free"},
        ],
    )
    apply(
        scored_acme,
        group("e", "small", {"mrr": 10, "plan": "free"}),
        track("e", "A", account="small"),
    )
    apply(scored_acme, group("f", "big", {"mrr": 200000}), track("f", "A", account="big"))
    _refresh(scored_acme)
    assert _fired(only_big) == ["big"]
    assert _fired(either) == ["big", "small"]


def test_the_cool_down_holds_a_second_firing_back(scored_acme, receiver):
    automation = automation_create(
        workspace=scored_acme.workspace,
        trigger="score_changed",
        threshold=10,
        url=receiver.url,
        cooldown_seconds=3600,
    )
    _globodyne_arrives_busy(scored_acme)
    _refresh(scored_acme)
    assert _fired(automation) == ["globodyne"]
    globodyne = Account.objects.get(tracking_id="globodyne")
    # Globodyne leaves the condition and enters it again within the hour: held back.
    AutomationSubjectState.objects.filter(automation=automation, subject_id=globodyne.id).delete()
    apply(scored_acme, track("cat", "Report", account="globodyne"))
    _refresh(scored_acme)
    assert _fired(automation) == ["globodyne"]
    # An hour after the firing it fires again.
    AutomationFiring.objects.filter(automation=automation).update(
        fired_at=timezone.now() - timedelta(hours=1, seconds=1)
    )
    AutomationSubjectState.objects.filter(automation=automation, subject_id=globodyne.id).delete()
    apply(scored_acme, track("cat", "Report", account="globodyne"))
    _refresh(scored_acme)
    assert _fired(automation) == ["globodyne", "globodyne"]


def test_automations_of_one_refresh_each_keep_their_own_cool_down(scored_acme, receiver):
    """A refresh serves its automations together (one read of their firings, one write of
    their deliveries): each still holds back by its own cool-down, and an automation on users
    gets the user, one on accounts the account."""
    hourly, daily = (
        automation_create(
            workspace=scored_acme.workspace,
            trigger="score_changed",
            threshold=10,
            url=receiver.url,
            cooldown_seconds=seconds,
        )
        for seconds in (3600, 24 * 3600)
    )
    on_users = automation_create(
        workspace=scored_acme.workspace,
        trigger="score_changed",
        threshold=10,
        target="users",
        url=receiver.url,
    )
    _globodyne_arrives_busy(scored_acme)
    _refresh(scored_acme)
    assert (_fired(hourly), _fired(daily), _fired(on_users)) == (
        ["globodyne"],
        ["globodyne"],
        ["cat"],
    )
    # Two hours later Globodyne enters the condition again: past the hour, within the day.
    AutomationFiring.objects.filter(automation__in=[hourly, daily]).update(
        fired_at=timezone.now() - timedelta(hours=2)
    )
    globodyne = Account.objects.get(tracking_id="globodyne")
    AutomationSubjectState.objects.filter(
        automation__in=[hourly, daily], subject_id=globodyne.id
    ).delete()
    apply(scored_acme, track("cat", "Report", account="globodyne"))
    _refresh(scored_acme)
    assert (_fired(hourly), _fired(daily), _fired(on_users)) == (
        ["globodyne", "globodyne"],
        ["globodyne"],
        ["cat"],
    )


def test_inactive_fires_for_a_subject_past_the_days(scored_acme, receiver):
    automation = automation_create(
        workspace=scored_acme.workspace,
        trigger="inactive",
        days=3,
        target="users",
        url=receiver.url,
    )
    apply(scored_acme, group("old", "hooli"), track("old", "Report", days_ago=5, account="hooli"))
    _refresh(scored_acme)
    assert _fired(automation) == ["old"]
    assert Delivery.objects.get(automation=automation).event_type == "user.inactive"


def test_bad_settings_are_refused_with_every_reason(scored_acme, receiver):
    with pytest.raises(ValidationError) as refused:
        automation_create(
            workspace=scored_acme.workspace,
            trigger="score_changed",
            url="ftp://x",
            conditions=[{"field": "trait:x", "operator": "nope"}],
        )
    assert set(refused.value.message_dict) == {"threshold", "url", "conditions"}
    assert Automation.objects.count() == 0
    assert Account.objects.filter(tracking_id="initech").exists()


# Nested 3,000 levels (SQLite's JSON stores at most 1,000): no JSON encoder of Python writes it,
# so it is stored as text by SQL.
_NESTED = "nested"


def _nested_conditions() -> str:
    depth = 999 if connection.vendor == "sqlite" else 3000
    return "[" + '{"n": ' * depth + '"x"' + "}" * depth + "]"


@pytest.mark.parametrize(
    "conditions",
    [
        [{"field": "metric:engagement_score", "operator": "greater_than", "value": 10**30}],
        [{"field": "metric:last_seen", "operator": "within_last_days", "value": 10**12}],
        [{"field": "metric:last_seen", "operator": "within_last_days", "value": 1_000_000}],
        [{"field": "event:Report", "operator": "count_at_least", "value": 10**30}],
        _NESTED,
    ],
    ids=["score-1e30", "days-1e12", "days-1e6", "count-1e30", "nested-3000"],
)
def test_conditions_stored_past_the_checks_switch_the_automation_off_not_scoring(
    scored_acme, receiver, conditions
):
    """No configuration can stop scoring: an automation whose stored conditions cannot be
    evaluated is switched off with its reason; the refresh commits and the others fire."""
    broken = automation_create(
        workspace=scored_acme.workspace, trigger="score_changed", threshold=10, url=receiver.url
    )
    working = automation_create(
        workspace=scored_acme.workspace, trigger="score_changed", threshold=10, url=receiver.url
    )
    if conditions == _NESTED:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE automations_automation SET conditions = %s WHERE id = %s",
                [_nested_conditions(), broken.id],
            )
    else:
        Automation.objects.filter(id=broken.id).update(conditions=conditions)  # past the checks
    _globodyne_arrives_busy(scored_acme)

    _refresh(scored_acme)

    enabled, reason = Automation.objects.values_list("enabled", "disabled_reason").get(id=broken.id)
    assert not enabled
    assert reason.startswith("Its conditions cannot be evaluated")
    assert _fired(working) == ["globodyne"]
    assert AccountScore.objects.get(account__tracking_id="globodyne").engagement_score > 0
