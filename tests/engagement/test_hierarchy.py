"""Account hierarchy (issue 32 §5): a group call's `parent_group_id` trait makes the account the
child of the named one; a link that would close a cycle or make a chain deeper than ten is
refused, and the account keeps the parent it had. Company > Workspace > Project throughout."""

from datetime import UTC, datetime, timedelta
from math import floor

import pytest

from engagement.activation import activation_progress
from engagement.erasure import erasure_request, erasure_run
from engagement.features import features_used
from engagement.hierarchy import MAX_LEVELS, account_tree
from engagement.models import Account, Erasure, Segment, SegmentMember
from engagement.period_figures import period_figures
from engagement.scoring import workspace_refresh, workspace_rescore
from engagement.segments import segment_refresh
from engagement.services import Message, messages_apply
from engagement.workspace_config import workspace_config_apply, workspace_config_get
from tests.engagement import helpers as h

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

T0 = datetime(2026, 11, 20, 12, tzinfo=UTC)


def group(account: str, parent: str | None, *, at: datetime = T0, **traits) -> Message:
    return Message(
        "group",
        int(at.timestamp() * 1000),
        group_id=account,
        traits={"parent_group_id": parent, **traits},
    )


def apply(tenant, *messages: Message):
    return messages_apply(product_id=tenant.product.id, messages=list(messages))


def parent_of(tenant, tracking_id: str) -> str | None:
    account = Account.objects.select_related("parent").get(
        product=tenant.product, tracking_id=tracking_id
    )
    return account.parent.tracking_id if account.parent else None


def test_three_levels_link_and_a_new_parent_is_created(acme):
    result = apply(acme, group("globex-eu", "globex"), group("project-x", "globex-eu"))

    assert result.refused_parents == []
    assert parent_of(acme, "project-x") == "globex-eu"
    assert parent_of(acme, "globex-eu") == "globex"
    assert parent_of(acme, "globex") is None
    company = Account.objects.get(product=acme.product, tracking_id="globex")
    assert company.identified is False  # known only as a parent until its own group call
    tree = account_tree(account=Account.objects.get(tracking_id="project-x"))
    assert [a.tracking_id for a in tree.ancestors] == ["globex", "globex-eu"]
    assert [c.tracking_id for c in account_tree(account=company).children] == ["globex-eu"]


def test_a_link_that_closes_a_cycle_is_refused_and_the_rest_of_the_call_applied(acme):
    apply(acme, group("globex-eu", "globex"), group("project-x", "globex-eu"))

    result = apply(acme, group("globex", "project-x", at=T0 + timedelta(minutes=1), plan="pro"))

    [refused] = result.refused_parents
    assert (refused.account, refused.parent, refused.reason) == ("globex", "project-x", "cycle")
    assert "cycle" in refused.detail
    assert parent_of(acme, "globex") is None
    assert Account.objects.get(tracking_id="globex").traits["plan"] == "pro"


def test_an_account_cannot_be_its_own_parent(acme):
    [refused] = apply(acme, group("globex", "globex")).refused_parents

    assert refused.reason == "cycle"
    assert parent_of(acme, "globex") is None


def test_links_of_one_batch_that_form_a_cycle_are_broken_by_tracking_id(acme):
    # "a" goes under "b" first (tracking id order); "b" under "a" would then close the cycle.
    result = apply(acme, group("b", "a"), group("a", "b"))

    assert [(r.account, r.parent) for r in result.refused_parents] == [("b", "a")]
    assert parent_of(acme, "a") == "b"
    assert parent_of(acme, "b") is None


def test_a_chain_deeper_than_ten_is_refused(acme):
    names = [f"level-{n}" for n in range(1, MAX_LEVELS + 2)]
    links = zip(names[: MAX_LEVELS - 1], names[1:MAX_LEVELS], strict=True)
    apply(acme, *(group(child, parent) for parent, child in links))
    assert parent_of(acme, names[MAX_LEVELS - 1]) == names[MAX_LEVELS - 2]  # ten levels: fine

    [refused] = apply(acme, group(names[MAX_LEVELS], names[MAX_LEVELS - 1])).refused_parents

    assert refused.reason == "too_deep"
    assert parent_of(acme, names[MAX_LEVELS]) is None


def test_moving_a_subtree_under_a_deep_chain_counts_the_subtree(acme):
    apply(acme, *(group(f"deep-{n + 1}", f"deep-{n}") for n in range(1, 8)))  # 8 levels
    apply(acme, group("child", "top"), group("grandchild", "child"))  # 3 levels

    [refused] = apply(acme, group("top", "deep-8")).refused_parents  # 8 + 3 > 10

    assert refused.reason == "too_deep"
    assert parent_of(acme, "top") is None


def test_a_child_is_re_parented_and_a_null_parent_removes_the_link(acme):
    apply(acme, group("project-x", "globex-eu"))

    apply(acme, group("project-x", "globex-us", at=T0 + timedelta(minutes=1)))
    assert parent_of(acme, "project-x") == "globex-us"
    assert account_tree(account=Account.objects.get(tracking_id="globex-eu")).children == []

    apply(acme, group("project-x", None, at=T0 + timedelta(minutes=2)))
    assert parent_of(acme, "project-x") is None


def test_an_older_call_does_not_move_the_account_back(acme):
    apply(acme, group("project-x", "globex-us", at=T0))

    apply(acme, group("project-x", "globex-eu", at=T0 - timedelta(days=1)))

    assert parent_of(acme, "project-x") == "globex-us"


def test_erasing_a_parent_keeps_its_children(acme):
    apply(acme, group("globex-eu", "globex"), group("project-x", "globex-eu"))

    erasure = erasure_request(
        product_id=acme.product.id,
        kind=Erasure.Kind.ACCOUNT,
        target_id=Account.objects.get(tracking_id="globex-eu").id,
        suppress=False,
        via=Erasure.Via.COMMAND,
    )
    assert erasure_run(erasure_id=erasure.id).status == Erasure.Status.COMPLETED

    assert parent_of(acme, "project-x") is None
    assert parent_of(acme, "globex") is None


# --- Roll-up: a parent's figures cover its descendants -----------------------------------------


def figures(tenant) -> dict[str, tuple[int, int, int, list]]:
    """Per account: events in the window, total users, active users, breakdown counts."""
    from engagement.models import AccountScore

    return {
        s.account.tracking_id: (
            s.events_in_window,
            s.total_users,
            s.active_users,
            sorted((b["event"], b["count"]) for b in s.score_breakdown or []),
        )
        for s in AccountScore.objects.filter(workspace=tenant.workspace).select_related("account")
    }


@pytest.fixture
def company(acme):
    """Globex > Globex EU > Project X. Ann (Project X) made 3 reports today, Bo (Globex EU)
    2 exports; Cy is in Globex itself and did nothing."""
    apply(
        acme,
        group("globex-eu", "globex"),
        group("project-x", "globex-eu"),
        *h.group("ann", "project-x"),
        *h.group("bo", "globex-eu"),
        *h.group("cy", "globex"),
        *h.track("ann", "Report Created", times=3, account="project-x"),
        *h.track("bo", "Export", times=2, account="globex-eu"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    return acme


def test_events_and_users_roll_up_the_parent_chain(company):
    assert figures(company) == {
        "project-x": (3, 1, 1, [("Report Created", 3)]),
        "globex-eu": (5, 2, 2, [("Export", 2), ("Report Created", 3)]),
        "globex": (5, 3, 2, [("Export", 2), ("Report Created", 3)]),
    }


def test_an_incremental_refresh_updates_the_ancestors(company, settings):
    # Project Y, Di's, is a sibling the refresh does not recompute: its events still count for
    # the parents it does. Ed and Flo at Initech send the most events, so the refresh moves
    # no other user's score (the 90th percentile stays theirs), and without the watermark's
    # overlap it re-reads Ann's event only.
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    apply(
        company,
        group("project-y", "globex-eu"),
        *h.group("di", "project-y"),
        *h.track("di", "Export", account="project-y"),
        *h.group("ed", "initech"),
        *h.group("flo", "initech"),
        *h.track("ed", "Report Created", times=9, account="initech"),
        *h.track("flo", "Report Created", times=9, account="initech"),
    )
    workspace_rescore(workspace_id=company.workspace.id)
    apply(company, *h.track("ann", "Report Created", account="project-x"))

    result = workspace_refresh(workspace_id=company.workspace.id)

    assert result.mode == "incremental"
    found = figures(company)
    assert found["project-x"] == (4, 1, 1, [("Report Created", 4)])
    assert found["project-y"] == (1, 1, 1, [("Export", 1)])
    assert found["globex-eu"] == (7, 3, 3, [("Export", 3), ("Report Created", 4)])
    assert found["globex"] == (7, 4, 3, [("Export", 3), ("Report Created", 4)])


def scores(tenant) -> dict[str, int]:
    from engagement.models import AccountScore, UserScore

    users = UserScore.objects.filter(workspace=tenant.workspace).select_related("user")
    accounts = AccountScore.objects.filter(workspace=tenant.workspace).select_related("account")
    return {s.user.tracking_id: s.engagement_score for s in users} | {
        s.account.tracking_id: s.engagement_score for s in accounts
    }


@pytest.mark.parametrize("refresh", ["rescore", "incremental"])
def test_a_user_linked_to_several_accounts_of_a_tree_counts_once(company, refresh):
    # Bo joins Project X (under Globex EU, which Bo is in already) and Initech, outside the tree.
    apply(company, *h.group("bo", "project-x"), *h.group("bo", "initech"))
    if refresh == "rescore":
        workspace_rescore(workspace_id=company.workspace.id)
    else:
        assert workspace_refresh(workspace_id=company.workspace.id).mode == "incremental"

    found, score = figures(company), scores(company)
    assert {name: users for name, (_, *users, _) in found.items()} == {
        "project-x": [2, 2],
        "globex-eu": [2, 2],
        "globex": [3, 2],
        "initech": [1, 1],
    }
    # A parent scores its users' mean (rounded half up), each user once: Cy has no score and
    # counts 0.
    assert score["globex"] == floor((score["ann"] + score["bo"]) / 3 + 0.5)
    assert score["globex-eu"] == floor((score["ann"] + score["bo"]) / 2 + 0.5)
    assert score["initech"] == score["bo"]


def test_a_re_parented_child_leaves_its_old_parents_figures(company):
    apply(company, group("project-x", "globex-us", at=datetime.now(UTC)))

    workspace_refresh(workspace_id=company.workspace.id)

    found = figures(company)
    assert found["globex-eu"] == (2, 1, 1, [("Export", 2)])
    assert found["globex"] == (2, 2, 1, [("Export", 2)])
    assert found["globex-us"] == (3, 1, 1, [("Report Created", 3)])


def tracking_ids(tenant, ids) -> set[str]:
    return set(
        Account.objects.filter(product=tenant.product, id__in=ids).values_list(
            "tracking_id", flat=True
        )
    )


def account_ids(tenant) -> dict[str, int]:
    return dict(Account.objects.filter(product=tenant.product).values_list("tracking_id", "id"))


@pytest.mark.parametrize(
    ("event", "times", "members"),
    [
        ("Report Created", 3, {"project-x", "globex-eu", "globex"}),
        ("Export", 2, {"globex-eu", "globex"}),
        ("Export", 3, set()),
    ],
)
def test_event_conditions_count_a_parents_descendants(company, event, times, members):
    segment = Segment.objects.create(
        workspace=company.workspace,
        name="Busy",
        target=Segment.Target.ACCOUNTS,
        conditions=[
            {
                "field": f"event:{event}",
                "operator": "count_at_least",
                "value": times,
                "within_last_days": 7,
            }
        ],
    )

    segment_refresh(segment=segment)

    joined = SegmentMember.objects.filter(segment=segment).values_list("account_id", flat=True)
    assert tracking_ids(company, joined) == members


def test_overall_scored_events_cover_the_descendants(company):
    ids = account_ids(company)

    found = period_figures(workspace=company.workspace, target="account", ids=list(ids.values()))

    assert {t: found[i].overall_scored_events for t, i in ids.items()} == {
        "project-x": 3,
        "globex-eu": 5,
        "globex": 5,
    }


def test_features_used_by_descendants_count_for_the_parent(company):
    document = workspace_config_get(workspace=company.workspace)
    document["features"] = {"Reporting": ["Report Created"], "Exports": ["Export"]}
    workspace_config_apply(workspace_id=company.workspace.id, document=document)
    ids = account_ids(company)

    found = features_used(workspace=company.workspace, target="account", ids=list(ids.values()))

    used = {t: [f.feature for f in found[i] if f.used] for t, i in ids.items()}
    assert used == {
        "project-x": ["Reporting"],
        "globex-eu": ["Reporting", "Exports"],
        "globex": ["Reporting", "Exports"],
    }


def test_activation_steps_done_by_descendants_users_count_for_the_parent(company):
    document = workspace_config_get(workspace=company.workspace)
    document["activation"] = {"users": [], "accounts": ["event:Export", "trait:plan"]}
    workspace_config_apply(workspace_id=company.workspace.id, document=document)
    apply(company, *h.identify("ann", {"plan": "pro"}))
    ids = account_ids(company)

    found = activation_progress(
        workspace=company.workspace, target="account", ids=list(ids.values())
    )

    done = {t: [s.done for s in found[i].steps] for t, i in ids.items()}
    assert done == {
        "project-x": [False, True],  # Ann's plan; Bo's export was in Globex EU, above it
        "globex-eu": [True, True],
        "globex": [True, True],
    }


@pytest.mark.parametrize("with_features", [False, True])
def test_a_parent_weighs_its_descendants_events_by_the_workspace_weights(company, with_features):
    # Reports weigh 5 and exports nothing: the parents' raw scores and breakdowns follow the
    # weights on their descendants' events, as an account's own events do.
    document = workspace_config_get(workspace=company.workspace)
    document["weights"] = {"Report Created": 5, "Export": 0}
    if with_features:
        document["features"] = {"Reporting": ["Report Created"], "Exports": ["Export"]}
    workspace_config_apply(workspace_id=company.workspace.id, document=document)
    workspace_rescore(workspace_id=company.workspace.id)
    from engagement.models import AccountScore

    rows = AccountScore.objects.filter(workspace=company.workspace).select_related("account")
    found = {
        s.account.tracking_id: (
            s.raw_score,
            s.adoption,
            [(b["event"], b["count"], b["weight"]) for b in s.score_breakdown],
        )
        for s in rows
    }

    reports = [("Report Created", 3, 5)]
    # Adoption: the share of features with any event; without features, of weighted names
    # used (exports weigh nothing, so they are not a name to adopt).
    assert found == {
        "project-x": (15, 0.5 if with_features else 1.0, reports),
        "globex-eu": (15, 1.0, reports),
        "globex": (15, 1.0, reports),
    }
