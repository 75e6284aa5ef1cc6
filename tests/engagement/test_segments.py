"""Segments: every operator on traits (am. keys included) and metrics, join and leave times."""

from datetime import UTC, datetime, time, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction

from engagement.models import (
    Account,
    Erasure,
    Segment,
    SegmentMember,
    SegmentMembershipChange,
)
from engagement.scoring import workspace_refresh, workspace_rescore
from engagement.segment_conditions import segment_conditions_validate
from engagement.segments import segment_changes_purge, segment_refresh, segments_refresh
from tests.engagement.helpers import apply, erase, group, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def days_ago(n: int) -> str:
    return (datetime.now(UTC) - timedelta(days=n)).date().isoformat()


@pytest.fixture
def scored(acme):
    """A: enterprise, active, 50 seats, scores 100. B: free, cancelled, 5 seats, 36. C: bare."""
    apply(
        acme,
        group(
            "a1",
            "A",
            {
                "name": "Acme Corp",
                "plan": "enterprise",
                "am.status": "active",
                "am.tier": "50 Users",
                "seats": 50,
                "trialStarted": days_ago(3),
            },
        ),
        group(
            "b1",
            "B",
            {
                "name": "Beta LLC",
                "plan": "free",
                "am.status": "cancelled",
                "seats": 5,
                "trialStarted": days_ago(30),
            },
        ),
        group("c1", "C", {"name": "corpus inc"}),
        track("a1", "Login", times=3),
        track("b1", "Login"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    return acme


def members(segment: Segment) -> set[str]:
    rows = SegmentMember.objects.filter(segment=segment).select_related("account", "user")
    return {(row.account or row.user).tracking_id for row in rows}


def segment_of(tenant, *conditions, target=Segment.Target.ACCOUNTS) -> Segment:
    segment = Segment.objects.create(
        workspace=tenant.workspace, name="s", target=target, conditions=list(conditions)
    )
    segment_refresh(segment=segment)
    return segment


def changes(segment: Segment) -> list[tuple[str, str]]:
    rows = SegmentMembershipChange.objects.filter(segment=segment).select_related("account", "user")
    return sorted(((row.account or row.user).tracking_id, row.change) for row in rows)


def cond(field, operator, value=None):
    return {"field": field, "operator": operator, "value": value}


def event_cond(name, times, days=None):
    condition = {"field": f"event:{name}", "operator": "count_at_least", "value": times}
    if days is not None:
        condition["within_last_days"] = days
    return condition


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        (cond("trait:am.status", "equals", "active"), {"A"}),
        (cond("trait:plan", "not_equals", "free"), {"A", "C"}),  # C has no plan at all
        (cond("trait:name", "contains", "CORP"), {"A", "C"}),
        (cond("trait:seats", "greater_than", 10), {"A"}),
        (cond("trait:seats", "less_than", 10), {"B"}),
        (cond("trait:am.tier", "is_set"), {"A"}),
        (cond("trait:am.tier", "is_not_set"), {"B", "C"}),
        (cond("trait:trialStarted", "within_last_days", 7), {"A"}),
        (cond("trait:trialStarted", "more_than_days_ago", 7), {"B"}),  # C has no trialStarted
        (cond("metric:engagement_score", "greater_than", 50), {"A"}),
        (cond("metric:engagement_score", "less_than", 50), {"B", "C"}),
        (cond("metric:engagement_score", "equals", 36), {"B"}),
        (cond("metric:engagement_score", "not_equals", 36), {"A", "C"}),
        (cond("metric:active_users", "equals", 0), {"C"}),
        (cond("metric:last_seen", "within_last_days", 1), {"A", "B"}),
        (cond("metric:last_seen", "is_not_set"), {"C"}),
        (cond("metric:last_seen", "within_last_days", 0), {"A", "B"}),  # today, UTC
        (cond("metric:last_seen", "more_than_days_ago", 0), set()),
        # Events, from the rollups: A sent Login three times today, B once.
        (event_cond("Login", 2), {"A"}),
        (event_cond("Login", 1, days=0), {"A", "B"}),
        (event_cond("Login", 4), set()),
        (event_cond("Logout", 1), set()),
    ],
)
def test_each_operator(scored, condition, expected):
    assert members(segment_of(scored, condition)) == expected


def test_all_conditions_must_hold(scored):
    segment = segment_of(
        scored,
        cond("trait:name", "contains", "corp"),
        cond("metric:engagement_score", "greater_than", 0),
    )
    assert members(segment) == {"A"}


def test_a_segment_matching_any_condition(scored):
    segment = Segment.objects.create(
        workspace=scored.workspace,
        name="any",
        match=Segment.Match.ANY,
        conditions=[cond("trait:plan", "equals", "free"), cond("trait:name", "contains", "inc")],
    )
    segment_refresh(segment=segment)
    assert members(segment) == {"B", "C"}
    segment.match = Segment.Match.ALL
    segment.save()
    segment_refresh(segment=segment)
    assert members(segment) == set()


def test_event_conditions_count_the_days_asked_for(scored):
    # a1 sent Export 2 times 10 days ago and once today; b1 once, 3 days ago.
    apply(
        scored,
        track("a1", "Export", days_ago=10, times=2),
        track("a1", "Export"),
        track("b1", "Export", days_ago=3),
    )
    assert members(segment_of(scored, event_cond("Export", 3))) == {"A"}
    assert members(segment_of(scored, event_cond("Export", 3, days=10))) == {"A"}
    assert members(segment_of(scored, event_cond("Export", 3, days=9))) == set()
    assert members(segment_of(scored, event_cond("Export", 1, days=3))) == {"A", "B"}
    assert members(segment_of(scored, event_cond("Export", 1, days=2))) == {"A"}
    users = segment_of(scored, event_cond("Export", 2, days=30), target=Segment.Target.USERS)
    assert members(users) == {"a1"}


def test_user_segments_use_user_traits_and_metrics(scored):
    segment = segment_of(
        scored,
        cond("metric:raw_score", "greater_than", 0),
        target=Segment.Target.USERS,
    )
    assert members(segment) == {"a1", "b1"}


def test_members_join_and_leave_with_their_times(scored):
    segment = segment_of(scored, cond("metric:engagement_score", "greater_than", 50))
    first = SegmentMember.objects.get(segment=segment)
    assert first.account.tracking_id == "A"
    # B overtakes A: B joins now, A leaves; a member that stays keeps its joined_at.
    apply(scored, track("b1", "Login", times=20))
    later = datetime.now(UTC) + timedelta(minutes=5)
    workspace_refresh(workspace_id=scored.workspace.id, now=later)
    assert members(segment) == {"B"}
    assert SegmentMember.objects.get(segment=segment).joined_at == later
    segment_refresh(segment=segment, now=later + timedelta(hours=1))
    assert SegmentMember.objects.get(segment=segment).joined_at == later


def test_every_join_and_leave_is_logged_once(scored):
    segment = segment_of(scored, cond("metric:engagement_score", "greater_than", 50))
    assert changes(segment) == [("A", "joined")]
    apply(scored, track("b1", "Login", times=20))
    later = datetime.now(UTC) + timedelta(minutes=5)
    # The score refresh refreshes the workspace's segments.
    workspace_refresh(workspace_id=scored.workspace.id, now=later)
    assert changes(segment) == [("A", "joined"), ("A", "left"), ("B", "joined")]
    left = SegmentMembershipChange.objects.get(segment=segment, change="left")
    assert left.at == later
    # Nothing moved: a refresh logs nothing.
    assert segment_refresh(segment=segment, now=later + timedelta(hours=1)) == (0, 0)
    assert len(changes(segment)) == 3


def test_a_user_leaving_a_user_segment_is_logged_with_the_user(scored):
    segment = segment_of(scored, cond("trait:plan", "is_not_set"), target=Segment.Target.USERS)
    assert changes(segment) == [("a1", "joined"), ("b1", "joined"), ("c1", "joined")]
    segment.conditions = [cond("metric:engagement_score", "greater_than", 50)]
    segment.save()
    segment_refresh(segment=segment)
    assert [c for c in changes(segment) if c[1] == "left"] == [("b1", "left"), ("c1", "left")]
    account_changes = SegmentMembershipChange.objects.filter(segment=segment, account__isnull=False)
    assert not account_changes.exists()


@pytest.mark.parametrize(
    ("target", "ids"),
    [(Segment.Target.ACCOUNTS, ("A", "B", "C")), (Segment.Target.USERS, ("a1", "b1", "c1"))],
)
def test_a_refresh_among_ids_moves_only_those_and_logs_each_move_once(scored, target, ids):
    """As an incremental refresh compares a segment: only the subjects it names can join or
    leave, each join and leave logged once, in the one refresh."""
    scoring_100, scoring_36, bare = ids
    segment = segment_of(scored, cond("metric:engagement_score", "greater_than", 50), target=target)
    assert members(segment) == {scoring_100}
    subjects = (
        scored.product.accounts if target == Segment.Target.ACCOUNTS else scored.product.users
    )
    subject = {key: subjects.get(tracking_id=key) for key in ids}
    column = "account" if target == Segment.Target.ACCOUNTS else "user"
    # By hand, against the conditions: the one that matches is out, the two that do not are in.
    SegmentMember.objects.filter(segment=segment).delete()
    for key in (scoring_36, bare):
        SegmentMember.objects.create(
            segment=segment, joined_at=datetime.now(UTC), **{column: subject[key]}
        )
    later = datetime.now(UTC) + timedelta(minutes=5)

    moved = segment_refresh(
        segment=segment, now=later, among=[subject[scoring_100].id, subject[scoring_36].id]
    )

    assert moved == (1, 1)
    # The bare one was not among them: it stays, though it does not match.
    assert members(segment) == {scoring_100, bare}
    assert changes(segment) == sorted(
        [(scoring_100, "joined"), (scoring_100, "joined"), (scoring_36, "left")]
    )
    rejoined = SegmentMember.objects.get(segment=segment, **{column: subject[scoring_100]})
    assert rejoined.joined_at == later
    assert segment_refresh(segment=segment, now=later, among=[subject[scoring_100].id]) == (0, 0)


def test_a_workspace_refresh_among_ids_compares_user_and_account_segments_alike(scored):
    """As an incremental score refresh runs it: each segment compared among the ids of its
    own target, and nothing of the comparison left on the connection afterwards."""
    accounts = segment_of(scored, cond("metric:engagement_score", "greater_than", 50))
    users = segment_of(
        scored, cond("metric:engagement_score", "greater_than", 50), target=Segment.Target.USERS
    )
    assert (members(accounts), members(users)) == ({"A"}, {"a1"})
    account = {a.tracking_id: a for a in scored.product.accounts.all()}
    user = {u.tracking_id: u for u in scored.product.users.all()}
    # By hand, against the conditions: the one that matches is out, one that does not is in.
    SegmentMember.objects.filter(segment__in=[accounts, users]).delete()
    now = datetime.now(UTC)
    SegmentMember.objects.create(segment=accounts, account=account["B"], joined_at=now)
    SegmentMember.objects.create(segment=users, user=user["b1"], joined_at=now)

    accounts.refresh_from_db()
    users.refresh_from_db()
    segments_refresh(
        workspace_id=scored.workspace.id,
        now=max(accounts.members_refreshed_at, users.members_refreshed_at) + timedelta(seconds=1),
        user_ids=[user["a1"].id, user["b1"].id],
        account_ids=[account["A"].id],
    )

    # B was not among the accounts compared: it stays, though it does not match.
    assert members(accounts) == {"A", "B"}
    assert members(users) == {"a1"}
    assert [c for c in changes(users) if c[1] == "left"] == [("b1", "left")]
    for target in ("user", "account"):
        with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SELECT 1 FROM eds_t_segment_among_{target}")  # noqa: S608


def test_changes_older_than_the_retention_are_purged(scored, settings):
    settings.SEGMENT_CHANGES_RETENTION_DAYS = 30
    now = datetime.now(UTC)
    segment = segment_of(scored, cond("trait:plan", "is_set"))
    SegmentMembershipChange.objects.filter(segment=segment, account__tracking_id="A").update(
        at=now - timedelta(days=31)
    )
    assert segment_changes_purge(now=now) == 1
    assert changes(segment) == [("B", "joined")]
    assert members(segment) == {"A", "B"}


def test_trait_change_moves_membership_on_the_next_refresh(scored, settings):
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    segment = segment_of(scored, cond("trait:am.status", "equals", "active"))
    assert members(segment) == {"A"}
    apply(scored, group("b1", "B", {"am.status": "active"}, days_ago=0))
    workspace_refresh(workspace_id=scored.workspace.id)
    assert members(segment) == {"A", "B"}


DAYS = "a whole number from 0 to 3,650"


@pytest.mark.parametrize(
    ("conditions", "fault"),
    [
        ("not a list", "conditions: a list of {field, operator, value} objects"),
        ([1], "conditions[0]: an object with field, operator and value"),
        (
            [cond("trait:plan", "matches", "x")],
            "conditions[0].operator: one of equals, not_equals, contains, greater_than, "
            "less_than, is_set, is_not_set, within_last_days, more_than_days_ago",
        ),
        (
            [cond("trait:plan", "equals", "x"), cond("plan", "equals", "x")],
            "conditions[1].field: 'trait:<key>', 'metric:<name>' or 'event:<name>'",
        ),
        ([cond("trait:", "equals", "x")], "conditions[0].field: 'trait:' and a trait name that"),
        ([cond("trait:pl\x00an", "equals", "x")], "conditions[0].field: must not contain NUL"),
        ([cond("trait:" + "k" * 256, "is_set")], "of at most 255 characters (this one has 256)"),
        ([cond("metric:karma", "equals", 1)], "conditions[0].field: a metric, one of "),
        (
            [cond("metric:engagement_score", "contains", "1")],
            "conditions[0].operator: contains applies to traits, not metrics",
        ),
        (
            [cond("metric:engagement_score", "greater_than", "high")],
            "conditions[0].value: engagement_score compares with a number from 0 to 32,767",
        ),
        # Beyond its column's range Django gives up on the lookup, and the refresh with it.
        (
            [cond("metric:engagement_score", "greater_than", 10**30)],
            "conditions[0].value: engagement_score compares with a number from 0 to 32,767",
        ),
        (
            [cond("metric:score_change", "less_than", -40000.5)],
            "conditions[0].value: score_change compares with a number from -32,768 to 32,767",
        ),
        (
            [cond("metric:tenure_days", "greater_than", 2**31)],
            "conditions[0].value: tenure_days compares with a number from 0 to 2,147,483,647",
        ),
        (
            [cond("metric:raw_score", "greater_than", 1e16)],
            "conditions[0].value: a finite number from -1e15 to 1e15",
        ),
        (
            [cond("metric:percentile_rank", "less_than", float("nan"))],
            "conditions[0].value: a finite number from -1e15 to 1e15",
        ),
        (
            [cond("metric:last_seen", "greater_than", "yesterday")],
            "conditions[0].value: an ISO 8601 date-time from 1970 to 2999",
        ),
        # Parsed, but it would overflow once moved to UTC; no such day; no such offset.
        ([cond("metric:last_seen", "less_than", "9999-12-31T23:00:00-05:00")], "from 1970 to 2999"),
        ([cond("metric:last_seen", "less_than", "2025-02-30T00:00:00")], "from 1970 to 2999"),
        ([cond("metric:last_seen", "less_than", "2025-01-01T00:00:00+99:00")], "1970 to 2999"),
        (
            [cond("metric:last_seen", "equals", "2025-01-01")],
            "conditions[0].operator: compare last_seen with greater_than, less_than or a days",
        ),
        ([cond("trait:signup", "within_last_days", "7")], f"within_last_days counts days: {DAYS}"),
        ([cond("metric:last_seen", "within_last_days", 1_000_000)], f"counts days: {DAYS}"),
        ([cond("metric:last_seen", "more_than_days_ago", 10**12)], f"counts days: {DAYS}"),
        (
            [cond("metric:raw_score", "within_last_days", 7)],
            "conditions[0].operator: within_last_days applies to last_seen, not raw_score",
        ),
        ([cond("trait:plan", "equals")], "conditions[0].value: equals needs a value"),
        (
            [cond("trait:plan", "equals", ["a", ["b"]])],
            "conditions[0].value: a text, a number or true/false (not a list or an object)",
        ),
        ([cond("trait:plan", "equals", {"in": 1})], "(not a list or an object)"),
        ([cond("trait:plan", "not_equals", "x\x00")], "conditions[0].value: must not contain NUL"),
        ([cond("trait:plan", "equals", "\ud800")], "must be valid Unicode (no lone surrogates)"),
        ([cond("trait:plan", "equals", "x" * 1001)], "a text of at most 1,000 characters"),
        ([cond("trait:seats", "greater_than", 10**16)], "a finite number from -1e15 to 1e15"),
        ([cond("trait:seats", "less_than", float("inf"))], "a finite number from -1e15 to 1e15"),
        ([cond("trait:paid", "greater_than", True)], "greater_than compares with a number or a"),
        ([cond("trait:name", "contains", "")], "conditions[0].value: a text that is not empty"),
        ([cond("trait:plan", "is_set", [[]])], "conditions[0].value: a text, a number or"),
        (
            [cond("event:Login", "equals", 1)],
            "conditions[0].operator: an event condition's operator is count_at_least",
        ),
        (
            [event_cond("Login", 0)],
            "conditions[0].value: count_at_least counts times: a whole number from 1 to "
            "2,147,483,647",
        ),
        ([event_cond("Login", 10**30)], "count_at_least counts times: a whole number from 1"),
        ([event_cond("Login", 2.5)], "count_at_least counts times: a whole number from 1"),
        ([event_cond("Login", 1, days=-1)], f"conditions[0].within_last_days: {DAYS}"),
        ([event_cond("Login", 1, days=10**12)], f"conditions[0].within_last_days: {DAYS}"),
        ([event_cond("", 1)], "conditions[0].field: 'event:' and an event name that is not empty"),
        ([event_cond("Log\x00in", 1)], "conditions[0].field: must not contain NUL"),
        (
            [{**event_cond("Login", 1), "day": 1}],
            "conditions[0]: unknown keys 'day'; a condition has field, operator, value, "
            "within_last_days",
        ),
        ([{**cond("trait:plan", "is_set"), "within_last_days": 3}], "unknown keys"),
        (
            [cond("trait:plan", "is_set")] * 51,
            "conditions: at most 50 conditions (this list has 51)",
        ),
    ],
)
def test_invalid_conditions_are_refused_with_the_path_of_each_fault(conditions, fault):
    with pytest.raises(ValidationError) as error:
        segment_conditions_validate(target="accounts", conditions=conditions)
    assert any(fault in message for message in error.value.messages), error.value.messages


def test_every_fault_of_every_condition_is_listed_positions_from_0():
    conditions = [
        cond("trait:plan", "equals", "x"),
        cond("metric:engagement_score", "greater_than", 10**30),
        {**event_cond("Login", 0, days=4000), "extra": 1},
    ]
    with pytest.raises(ValidationError) as error:
        segment_conditions_validate(target="accounts", conditions=conditions, path="rules")
    assert error.value.messages == [
        "rules[1].value: engagement_score compares with a number from 0 to 32,767",
        "rules[2]: unknown keys 'extra'; a condition has field, operator, value, within_last_days",
        "rules[2].value: count_at_least counts times: a whole number from 1 to 2,147,483,647",
        f"rules[2].within_last_days: {DAYS}",
    ]


def test_the_bounds_themselves_are_accepted():
    conditions = [
        cond("metric:engagement_score", "less_than", 32767),
        cond("metric:score_change", "greater_than", -32768),
        cond("metric:raw_score", "greater_than", -(10**15)),
        cond("metric:last_seen", "greater_than", "1970-01-01"),
        cond("metric:last_seen", "less_than", "2999-12-31T23:59:59+05:00"),
        cond("metric:last_seen", "within_last_days", 3650),
        cond("trait:plan", "equals", "x" * 1000),
        cond("trait:seats", "greater_than", 10**15),
        event_cond("Login", 2**31 - 1, days=3650),
        *[cond("trait:plan", "is_set")] * 41,
    ]
    assert len(conditions) == 50
    assert segment_conditions_validate(target="accounts", conditions=conditions) == conditions


def test_account_metrics_are_not_user_metrics():
    with pytest.raises(ValidationError, match="conditions\\[0\\].field: a metric, one of"):
        segment_conditions_validate(
            target="users", conditions=[cond("metric:total_users", "greater_than", 1)]
        )


def test_conditions_at_the_bounds_are_evaluated(scored):
    """The largest values accepted evaluate on either database: no overflow, no lookup given up."""
    segment = segment_of(
        scored,
        cond("metric:engagement_score", "less_than", 32767),
        cond("metric:score_change", "greater_than", -32768),
        cond("metric:tenure_days", "less_than", 2**31 - 1),
        cond("metric:raw_score", "less_than", 10**15),
        cond("metric:last_seen", "less_than", "2999-12-31T23:59:59-05:00"),
        cond("metric:last_seen", "greater_than", "1970-01-01T00:00:00+05:00"),
        cond("metric:last_seen", "within_last_days", 3650),
        cond("trait:seats", "less_than", 10**15),
        event_cond("Login", 1, days=3650),
    )
    assert members(segment) == {"A", "B"}
    beyond = segment_of(scored, event_cond("Login", 2**31 - 1))
    assert members(beyond) == set()


# --- After an incremental refresh: the subjects it changed, and segments compared whole ----------


def refresh_incrementally(tenant, minutes: int = 5) -> datetime:
    # A few minutes on, but not into tomorrow (UTC): a refresh on a new day is a full rescore,
    # and the suite may run just before midnight.
    now = datetime.now(UTC)
    later = min(now + timedelta(minutes=minutes), datetime.combine(now.date(), time.max, UTC))
    assert workspace_refresh(workspace_id=tenant.workspace.id, now=later).mode == "incremental"
    return later


def test_an_incremental_refresh_leaves_the_unchanged_subjects_alone(scored, settings):
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    workspace_refresh(workspace_id=scored.workspace.id)
    segment = segment_of(scored, cond("trait:plan", "equals", "enterprise"))
    assert members(segment) == {"A"}
    # C is a member by hand: it does not match, but nothing about C changes below.
    c = scored.workspace.product.accounts.get(tracking_id="C")
    SegmentMember.objects.create(segment=segment, account=c, joined_at=datetime.now(UTC))
    apply(scored, group("b1", "B", {"plan": "enterprise"}, days_ago=0))
    refresh_incrementally(scored)
    # B changed and joined; C did not change, so the refresh did not compare it.
    assert members(segment) == {"A", "B", "C"}
    segment_refresh(segment=segment)
    assert members(segment) == {"A", "B"}


def test_a_segment_never_refreshed_is_compared_whole_by_an_incremental_refresh(scored, settings):
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    workspace_refresh(workspace_id=scored.workspace.id)
    # As a workspace's built-in segments arrive: created, members left to the next refresh.
    segment = Segment.objects.create(
        workspace=scored.workspace, name="plans", conditions=[cond("trait:plan", "is_set")]
    )
    apply(scored, group("c1", "C", {"plan": "free"}, days_ago=0))
    refresh_incrementally(scored)
    assert members(segment) == {"A", "B", "C"}


def test_a_segment_changed_since_its_last_refresh_is_compared_whole(scored, settings):
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    workspace_refresh(workspace_id=scored.workspace.id)
    segment = segment_of(scored, cond("trait:plan", "equals", "enterprise"))
    segment.conditions = [cond("trait:plan", "equals", "free")]
    segment.save()  # its own refresh not run yet
    apply(scored, group("c1", "C", {"seats": 2}, days_ago=0))
    refresh_incrementally(scored)
    assert members(segment) == {"B"}


def test_a_rank_segment_follows_ranks_that_moved_for_subjects_not_recomputed(scored, settings):
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    workspace_refresh(workspace_id=scored.workspace.id)
    segment = segment_of(scored, cond("metric:percentile_rank", "less_than", 60))
    # Ranked among the active accounts: A (100) 100, B (36) 0; C scores 0 and has no rank,
    # which no comparison matches.
    assert members(segment) == {"B"}
    # A new account as active as A (its user at the p90, which stays where it was for a1):
    # A's rank falls to 50, shared with D, although A itself was not recomputed.
    apply(
        scored,
        group("d1", "D", {"name": "Delta"}, days_ago=0),
        track("d1", "Login", times=3, days_ago=0),
    )
    refresh_incrementally(scored)
    assert members(segment) == {"A", "B", "D"}


def test_within_last_days_counts_the_whole_of_today(scored):
    # Day by day: a last seen later today (a clock ahead of ours) is today, as for traits.
    segment = segment_of(scored, cond("metric:last_seen", "within_last_days", 0))
    now = datetime.now(UTC)
    assert "C" not in members(segment)  # never seen
    score = scored.workspace.account_scores.get(account__tracking_id="C")
    end_of_today = datetime.combine(now.date(), datetime.max.time(), tzinfo=UTC)
    score.last_seen = end_of_today
    score.save(update_fields=["last_seen"])
    segment_refresh(segment=segment, now=now)
    assert "C" in members(segment)


def test_deleting_a_segment_or_erasing_an_account_takes_its_memberships_and_changes(scored):
    # The rows carry no database-level foreign keys (a refresh writes hundreds of thousands):
    # the ORM's cascade and the erasure remove them.
    plan_set = segment_of(scored, cond("trait:plan", "is_set"))
    seats = segment_of(scored, cond("trait:seats", "greater_than", 1))
    assert members(plan_set) == members(seats) == {"A", "B"}

    plan_set.delete()
    beta = Account.objects.get(product=scored.product, tracking_id="B")
    assert erase(scored, beta, Erasure.Kind.ACCOUNT).status == Erasure.Status.COMPLETED

    assert not SegmentMember.objects.filter(segment_id=plan_set.id).exists()
    assert not SegmentMembershipChange.objects.filter(segment_id=plan_set.id).exists()
    assert members(seats) == {"A"}
    assert changes(seats) == [("A", "joined")]
