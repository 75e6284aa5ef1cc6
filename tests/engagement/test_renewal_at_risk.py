"""The built-in segment "Renewal at risk" and the two pieces of the condition language it is
written in: `within_next_days` (a date trait from tomorrow to N days ahead) and a group
{"any": [...]} (one of its conditions holds). Accounts are built by hand, their dates relative to
today, on both databases."""

import importlib
from datetime import UTC, datetime, timedelta

import pytest
from django.apps import apps as django_apps
from django.core.exceptions import ValidationError

from engagement.builtin_segments import RENEWAL_AT_RISK
from engagement.models import Account, AccountScore, Segment, SegmentMember, Workspace
from engagement.presentation import condition_text
from engagement.segment_conditions import segment_conditions_validate
from engagement.segments import segment_refresh, segments_refresh
from engagement.services import product_create

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]

NOW = datetime.now(UTC)


def ahead(days: int) -> str:
    """The ISO date `days` days from today (UTC); negative: days ago."""
    return (NOW + timedelta(days=days)).date().isoformat()


def paying(renews_in: int, **traits) -> dict:
    """The `am.` traits of an active commercial license renewing in `renews_in` days."""
    return {
        "am.status": "active",
        "am.licenseType": "COMMERCIAL",
        "am.maintenanceEndDate": ahead(renews_in),
        **traits,
    }


def account(workspace, tracking_id: str, traits: dict, score: int = 30, change: int = 0):
    found = Account.objects.create(
        product=workspace.product, tracking_id=tracking_id, traits=traits
    )
    AccountScore.objects.create(
        workspace=workspace, account=found, engagement_score=score, score_change=change
    )
    return found


def members(segment: Segment) -> set[str]:
    rows = SegmentMember.objects.filter(segment=segment)
    return set(rows.values_list("account__tracking_id", flat=True))


def at_risk(workspace) -> Segment:
    return Segment.objects.get(workspace=workspace, name=RENEWAL_AT_RISK)


def test_it_holds_paying_accounts_renewing_within_60_days_with_a_low_or_falling_score():
    _, workspace = product_create(name="Initech")
    # Renewal dates at the edges: today is not "after today", 60 days ahead is the last day.
    account(workspace, "tomorrow", paying(1), score=49)
    account(workspace, "in-60-days", paying(60), score=10)
    account(workspace, "today", paying(0), score=10)
    account(workspace, "in-61-days", paying(61), score=10)
    account(workspace, "lapsed", paying(-5), score=10)
    # The score: under 50, or fallen by 10 or more, whatever the score.
    account(workspace, "healthy", paying(30), score=50, change=-9)
    account(workspace, "falling", paying(30), score=90, change=-10)
    # The license: active and commercial only.
    account(workspace, "cancelled", paying(30, **{"am.status": "cancelled"}), score=10)
    account(workspace, "evaluation", paying(30, **{"am.licenseType": "EVALUATION"}), score=10)
    account(workspace, "no-license", {"name": "Plain"}, score=10)
    # A date-time in the trait counts by its day.
    account(workspace, "date-time", paying(0, **{"am.maintenanceEndDate": ahead(7) + "T23:59"}))
    segments_refresh(workspace_id=workspace.id, now=NOW)
    segment = at_risk(workspace)
    assert members(segment) == {"tomorrow", "in-60-days", "falling", "date-time"}
    assert (segment.builtin, segment.target, segment.match) == (True, "accounts", "all")


def test_members_move_as_the_days_pass():
    _, workspace = product_create(name="Initech")
    account(workspace, "acme", paying(61), score=20)
    segments_refresh(workspace_id=workspace.id, now=NOW)
    assert members(at_risk(workspace)) == set()
    segments_refresh(workspace_id=workspace.id, now=NOW + timedelta(days=1))
    assert members(at_risk(workspace)) == {"acme"}
    # On its renewal day it is no longer ahead.
    segments_refresh(workspace_id=workspace.id, now=NOW + timedelta(days=61))
    assert members(at_risk(workspace)) == set()


def test_its_conditions_read_as_sentences():
    said = [condition_text(c) for c in at_risk_conditions()]
    assert said == [
        "am.status equals active",
        "am.licenseType equals COMMERCIAL",
        "am.maintenanceEndDate within the next 60 days",
        "(score less than 50 or score change less than -9)",
    ]


def at_risk_conditions() -> list[dict]:
    _, workspace = product_create(name="Initech")
    return at_risk(workspace).conditions


# --- The condition language: within_next_days and groups ---------------------------------------


def test_any_segment_can_use_a_group_and_within_next_days():
    _, workspace = product_create(name="Initech")
    account(workspace, "trial-ends-soon", {"trialEnds": ahead(3), "plan": "free"}, score=80)
    account(workspace, "enterprise", {"plan": "enterprise"}, score=80)
    account(workspace, "later", {"trialEnds": ahead(30), "plan": "free"}, score=80)
    account(workspace, "quiet", {"trialEnds": ahead(3), "plan": "free"}, score=5)
    segment = Segment.objects.create(
        workspace=workspace,
        name="Worth a call",
        conditions=[
            {"field": "metric:engagement_score", "operator": "greater_than", "value": 50},
            {
                "any": [
                    {"field": "trait:plan", "operator": "equals", "value": "enterprise"},
                    {"field": "trait:trialEnds", "operator": "within_next_days", "value": 7},
                ]
            },
        ],
    )
    segment_refresh(segment=segment, now=NOW)
    assert members(segment) == {"trial-ends-soon", "enterprise"}
    # In a segment matching any condition, a group is one condition among them.
    segment.match = "any"
    segment.save()
    segment_refresh(segment=segment, now=NOW)
    assert members(segment) == {"trial-ends-soon", "enterprise", "later", "quiet"}


@pytest.mark.parametrize(
    ("conditions", "fault"),
    [
        (
            [{"field": "metric:last_seen", "operator": "within_next_days", "value": 7}],
            "conditions[0].operator: within_next_days applies to traits (a date ahead), "
            "not metrics",
        ),
        (
            [{"field": "trait:renews", "operator": "within_next_days", "value": 0}],
            "conditions[0].value: within_next_days counts days: a whole number from 1 to 3,650",
        ),
        (
            [{"any": []}],
            "conditions[0].any: a list of at least one {field, operator, value} object",
        ),
        ([{"any": "plan"}], "conditions[0].any: a list of at least one {field, operator, value}"),
        (
            [{"any": [{"any": [{"field": "trait:a", "operator": "is_set"}]}]}],
            "conditions[0].any[0]: a group cannot hold a group",
        ),
        (
            [{"any": [{"field": "trait:a", "operator": "is_set"}], "field": "trait:b"}],
            "conditions[0]: unknown keys 'field'; a group has any",
        ),
        (
            [
                {"field": "trait:a", "operator": "is_set"},
                {"any": [{"field": "metric:engagement_score", "operator": "less_than"}]},
            ],
            "conditions[1].any[0].value: less_than needs a value",
        ),
    ],
)
def test_bad_groups_and_day_counts_are_refused_with_the_path_of_the_fault(conditions, fault):
    with pytest.raises(ValidationError) as refused:
        segment_conditions_validate(target="accounts", conditions=conditions)
    assert any(message.startswith(fault) for message in refused.value.messages), (
        refused.value.messages
    )


# --- The data migration -------------------------------------------------------------------------


def test_the_data_migration_gives_existing_workspaces_the_segment_once_and_reverses():
    _, fresh = product_create(name="Initech")
    older = Workspace.objects.create(product=fresh.product, name="Before the migration")
    own = Workspace.objects.create(product=fresh.product, name="Has its own")
    mine = Segment.objects.create(workspace=own, name=RENEWAL_AT_RISK, conditions=[])
    migration = importlib.import_module("engagement.migrations.0030_renewal_at_risk_segment")
    migration.renewal_at_risk_for_existing_workspaces(django_apps, None)
    migration.renewal_at_risk_for_existing_workspaces(django_apps, None)  # once only
    named = Segment.objects.filter(name=RENEWAL_AT_RISK)
    assert sorted(named.values_list("workspace_id", "builtin")) == sorted(
        [(fresh.id, True), (older.id, True), (own.id, False)]
    )
    assert at_risk(older).conditions == at_risk(fresh).conditions
    account(older, "acme", paying(10), score=20)
    segments_refresh(workspace_id=older.id, now=NOW)
    assert members(at_risk(older)) == {"acme"}

    migration.renewal_at_risk_remove(django_apps, None)
    assert list(named.values_list("id", flat=True)) == [mine.id]
    assert not SegmentMember.objects.filter(account__tracking_id="acme").exists()
