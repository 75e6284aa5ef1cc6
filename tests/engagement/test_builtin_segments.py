"""The segments every workspace starts with: created with the workspace (and for existing ones
by a data migration), kept by the score refresh like any other, editable and deletable."""

import importlib
from datetime import UTC, datetime, timedelta

import pytest
from django.apps import apps as django_apps

from engagement.builtin_segments import BUILTIN_SEGMENTS
from engagement.models import Account, AccountScore, Segment, SegmentMember, Workspace
from engagement.scoring import workspace_rescore
from engagement.segments import segments_refresh
from engagement.services import product_create
from tests.engagement.helpers import apply, group, track

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]

NAMES = [
    "Score 75 and over",
    "Score 50-74",
    "Score 25-49",
    "Score under 25",
    "Red Hot",
    "Ice Cold",
    "Recently Inactive",
    "Mature",
    "Active Today",
    "Multi-User",
    "Renewal at risk",
]


def members(workspace, name: str) -> set[str]:
    rows = SegmentMember.objects.filter(segment__workspace=workspace, segment__name=name)
    return set(rows.values_list("account__tracking_id", flat=True))


def test_a_new_workspace_starts_with_the_hosted_originals_segments():
    _, workspace = product_create(name="Initech")
    segments = Segment.objects.filter(workspace=workspace).order_by("id")
    assert [s.name for s in segments] == NAMES
    assert {(s.target, s.match, s.builtin) for s in segments} == {("accounts", "all", True)}


def test_existing_workspaces_get_them_from_the_data_migration():
    _, workspace = product_create(name="Initech")
    older = Workspace.objects.create(product=workspace.product, name="Before the migration")
    migration = importlib.import_module("engagement.migrations.0017_segment_match_builtin")
    Segment.objects.filter(workspace=workspace).delete()
    migration.builtin_segments_for_existing_workspaces(django_apps, None)
    for each in (workspace, older):
        names = Segment.objects.filter(workspace=each, builtin=True).values_list("name", flat=True)
        assert sorted(names) == sorted(NAMES)


def score(workspace, tracking_id: str, **values) -> None:
    account = Account.objects.create(product=workspace.product, tracking_id=tracking_id)
    AccountScore.objects.create(workspace=workspace, account=account, **values)


def test_each_built_in_segment_holds_the_accounts_it_names():
    _, workspace = product_create(name="Initech")
    now = datetime.now(UTC)
    score(workspace, "hot", engagement_score=80, score_change=10, last_seen=now, total_users=2)
    score(workspace, "warm", engagement_score=74, score_change=9, tenure_days=181, total_users=1)
    score(workspace, "cool", engagement_score=49, score_change=-10, last_seen=now - timedelta(40))
    score(workspace, "cold", engagement_score=24, score_change=-9, last_seen=now - timedelta(61))
    score(workspace, "edge", engagement_score=50, tenure_days=180, last_seen=now - timedelta(29))
    segments_refresh(workspace_id=workspace.id, now=now)
    expected = {
        "Score 75 and over": {"hot"},
        "Score 50-74": {"warm", "edge"},
        "Score 25-49": {"cool"},
        "Score under 25": {"cold"},
        "Red Hot": {"hot"},
        "Ice Cold": {"cool"},
        "Recently Inactive": {"cool"},
        "Mature": {"warm"},
        "Active Today": {"hot"},
        "Multi-User": {"hot"},
        "Renewal at risk": set(),  # no licenses here: tests/engagement/test_renewal_at_risk.py
    }
    assert {name: members(workspace, name) for name in NAMES} == expected


def test_the_score_refresh_keeps_them_and_they_edit_and_delete_like_any_other(acme):
    apply(acme, group("a1", "A"), group("b1", "A"), group("c1", "C"), track("a1", "Login"))
    workspace_rescore(workspace_id=acme.workspace.id)
    assert members(acme.workspace, "Multi-User") == {"A"}
    assert members(acme.workspace, "Active Today") == {"A"}
    multi = Segment.objects.get(workspace=acme.workspace, name="Multi-User")
    multi.conditions = [{"field": "metric:total_users", "operator": "greater_than", "value": 0}]
    multi.save()
    Segment.objects.filter(workspace=acme.workspace, name="Mature").delete()
    workspace_rescore(workspace_id=acme.workspace.id)
    assert members(acme.workspace, "Multi-User") == {"A", "C"}
    assert not Segment.objects.filter(workspace=acme.workspace, name="Mature").exists()
    assert len(BUILTIN_SEGMENTS) == len(NAMES)
