"""No stored segment stops scoring: one whose conditions cannot be evaluated is marked broken with
the reason, keeps its members and is skipped; every other score and segment moves on, and the
first refresh after its conditions are fixed clears the mark (issue 70). Each bad condition is
written straight into the database, past the checks a document, form or the admin applies."""

import pytest
from django.db import connection

from engagement import tasks
from engagement.models import Account, AccountScore, Segment, SegmentMember
from engagement.scoring import workspace_rescore
from engagement.segments import segments_refresh
from tests.engagement.helpers import apply, group, track

# Applies and scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

SCORED = {"field": "metric:engagement_score", "operator": "greater_than", "value": 0}
# The outside probe's conditions (issue 70), each of which made every rescore raise.
BAD_CONDITIONS = {
    "score beyond any number": {
        "field": "metric:engagement_score",
        "operator": "greater_than",
        "value": 10**30,
    },
    "count beyond any number": {
        "field": "event:Login",
        "operator": "count_at_least",
        "value": 10**30,
    },
    "a million days": {
        "field": "metric:last_seen",
        "operator": "within_last_days",
        "value": 1000000,
    },
    "10**12 days": {"field": "metric:last_seen", "operator": "within_last_days", "value": 10**12},
    "event in 10**12 days": {
        "field": "event:Login",
        "operator": "count_at_least",
        "value": 1,
        "within_last_days": 10**12,
    },
    "trait 10**12 days ago": {
        "field": "trait:trialStarted",
        "operator": "more_than_days_ago",
        "value": 10**12,
    },
}


@pytest.fixture
def workspace(acme):
    """Acme: Initech (ann, busy) scored; Umbrella (bob) known but without events yet. Segment
    "Active" holds the accounts that score; "Probe" too, until its conditions go bad."""
    apply(
        acme,
        group("ann", "initech", {"name": "Initech"}),
        group("bob", "umbrella", {"name": "Umbrella"}),
        track("ann", "Login", times=5, account="initech"),
    )
    for name in ("Active", "Probe"):
        Segment.objects.create(workspace=acme.workspace, name=name, conditions=[SCORED])
    workspace_rescore(workspace_id=acme.workspace.id)
    return acme


def segment(tenant, name: str) -> Segment:
    return Segment.objects.get(workspace=tenant.workspace, name=name)


def members(tenant, name: str) -> set[str]:
    rows = SegmentMember.objects.filter(segment=segment(tenant, name)).select_related("account")
    return {row.account.tracking_id for row in rows}


def score(tenant, tracking_id: str) -> int:
    return AccountScore.objects.get(
        workspace=tenant.workspace, account__tracking_id=tracking_id
    ).engagement_score


def store_past_the_checks(tenant, name: str, conditions: list) -> None:
    Segment.objects.filter(workspace=tenant.workspace, name=name).update(conditions=conditions)


@pytest.mark.parametrize("bad", BAD_CONDITIONS.values(), ids=BAD_CONDITIONS.keys())
def test_a_segment_that_cannot_be_evaluated_is_marked_broken_and_scoring_goes_on(workspace, bad):
    assert members(workspace, "Probe") == members(workspace, "Active") == {"initech"}
    assert score(workspace, "umbrella") == 0
    store_past_the_checks(workspace, "Probe", [SCORED, bad])

    # Umbrella's first events: its score moves, and it joins the segment that still works.
    apply(workspace, track("bob", "Login", times=5, account="umbrella"))
    assert tasks.workspace_rescore(workspace.workspace.id) == "full"

    assert score(workspace, "umbrella") > 0
    assert members(workspace, "Active") == {"initech", "umbrella"}
    probe = segment(workspace, "Probe")
    # The reason names the condition at fault, by its position in the JSON (from 0).
    assert probe.broken_reason.startswith("conditions[1]")
    assert probe.broken_at is not None
    # Its members are those of its last good refresh.
    assert members(workspace, "Probe") == {"initech"}
    assert segment(workspace, "Active").broken_reason == ""

    # Another rescore neither fails nor moves the time it broke.
    workspace_rescore(workspace_id=workspace.workspace.id)
    assert segment(workspace, "Probe").broken_at == probe.broken_at

    # Fixed: the next refresh evaluates it again and clears the mark.
    store_past_the_checks(workspace, "Probe", [SCORED])
    workspace_rescore(workspace_id=workspace.workspace.id)
    probe = segment(workspace, "Probe")
    assert (probe.broken_reason, probe.broken_at) == ("", None)
    assert members(workspace, "Probe") == {"initech", "umbrella"}


def _older_checks(*, target, conditions, path="conditions"):
    """The condition checks of an older release: any list passes."""
    return conditions


@pytest.mark.parametrize("bad", BAD_CONDITIONS.values(), ids=BAD_CONDITIONS.keys())
def test_conditions_an_older_release_let_through_break_the_segment_not_the_refresh(
    workspace, bad, monkeypatch
):
    """Evaluation does not rely on the checks: what they pass but the query cannot be built or
    run with (an overflowing date, a number no column holds) marks the segment broken too."""
    monkeypatch.setattr("engagement.segment_matching.segment_conditions_validate", _older_checks)
    store_past_the_checks(workspace, "Probe", [SCORED, bad])
    apply(workspace, track("bob", "Login", times=5, account="umbrella"))

    workspace_rescore(workspace_id=workspace.workspace.id)

    assert members(workspace, "Active") == {"initech", "umbrella"}
    assert segment(workspace, "Probe").broken_reason.startswith("conditions[1]: cannot be")
    assert members(workspace, "Probe") == {"initech"}


def test_a_date_time_beyond_utc_breaks_the_segment(workspace, monkeypatch):
    monkeypatch.setattr("engagement.segment_matching.segment_conditions_validate", _older_checks)
    late = {"field": "metric:last_seen", "operator": "less_than", "value": "9999-12-31T23:59-23:00"}
    store_past_the_checks(workspace, "Probe", [late])

    workspace_rescore(workspace_id=workspace.workspace.id)

    assert segment(workspace, "Probe").broken_reason.startswith("conditions[0]: cannot be")


def test_conditions_that_are_not_a_list_break_the_segment(workspace):
    store_past_the_checks(workspace, "Probe", {"field": "metric:engagement_score"})

    workspace_rescore(workspace_id=workspace.workspace.id)

    assert segment(workspace, "Probe").broken_reason.startswith("conditions: ")
    assert members(workspace, "Active") == members(workspace, "Probe") == {"initech"}


def test_a_number_with_more_digits_than_python_reads_breaks_the_segment(workspace):
    """The JSON column holds it; Django's decoding would raise for the whole workspace."""
    huge = '[{"field": "metric:engagement_score", "operator": "greater_than", "value": 1%s}]'
    _raw_conditions(workspace, "Probe", huge % ("0" * 5000))

    workspace_rescore(workspace_id=workspace.workspace.id)

    assert segment_reason(workspace, "Probe").startswith("conditions[0].value")


@pytest.mark.postgresql  # SQLite's JSON column refuses a document nested this deep
def test_conditions_nested_beyond_what_json_loads_reads_break_the_segment(workspace):
    _raw_conditions(workspace, "Probe", "[" * 5000 + "]" * 5000)

    workspace_rescore(workspace_id=workspace.workspace.id)

    assert segment_reason(workspace, "Probe").startswith("conditions[0]")
    assert members(workspace, "Active") == {"initech"}


def _raw_conditions(tenant, name: str, text: str) -> None:
    """Conditions as JSON text, straight into the column (as an older release or psql would)."""
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE engagement_segment SET conditions = %s{cast} WHERE id = %s",  # noqa: S608
            [text, segment_id(tenant, name)],
        )


def segment_id(tenant, name: str) -> int:
    return Segment.objects.values_list("id", flat=True).get(workspace=tenant.workspace, name=name)


def segment_reason(tenant, name: str) -> str:
    # Only the reason: the stored conditions may be more than Django's JSON decoding reads.
    return Segment.objects.values_list("broken_reason", flat=True).get(
        workspace=tenant.workspace, name=name
    )


def test_a_fixed_segment_is_compared_whole_by_the_next_incremental_refresh(workspace):
    """Its members are from before it broke: the subjects a refresh recomputed are not the only
    ones that may have joined or left meanwhile."""
    pro = {"field": "trait:plan", "operator": "equals", "value": "pro"}
    Segment.objects.create(workspace=workspace.workspace, name="Pro", conditions=[pro])
    workspace_rescore(workspace_id=workspace.workspace.id)
    store_past_the_checks(workspace, "Pro", [pro, BAD_CONDITIONS["a million days"]])
    # Umbrella goes pro while the segment is broken: it does not join.
    apply(workspace, group("bob", "umbrella", {"plan": "pro"}, days_ago=0))
    workspace_rescore(workspace_id=workspace.workspace.id)
    assert members(workspace, "Pro") == set()

    # Fixed without a save (updated_at stays); then a refresh in which only Initech changed,
    # the same UTC day as the segment's last good refresh.
    store_past_the_checks(workspace, "Pro", [pro])
    initech = Account.objects.get(product=workspace.product, tracking_id="initech")
    segments_refresh(workspace_id=workspace.workspace.id, user_ids=[], account_ids=[initech.id])

    assert segment(workspace, "Pro").broken_reason == ""
    assert members(workspace, "Pro") == {"umbrella"}
