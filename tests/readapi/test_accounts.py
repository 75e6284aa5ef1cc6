"""GET /v2/accounts (ranked) and /v2/accounts/{id} (full metric set)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from engagement.models import Workspace
from engagement.scoring import workspace_rescore
from readapi.serializers import AccountSerializer
from tests.engagement.helpers import apply, group, track
from tests.readapi.conftest import (
    add_account,
    add_segment,
    add_user,
    join,
    link,
    score_account,
    scored_peers,
)

pytestmark = pytest.mark.both_databases

METRICS = {
    "engagement_score",
    "score_change",
    "percentile_rank",
    "raw_score",
    "active_users",
    "total_users",
    "active_user_share",
    "active_days",
    "adoption",
    "events_in_window",
    "last_seen",
    "tenure_days",
    "score_breakdown",
}


def accounts_url(tenant, **params):
    return "/v2/accounts", {"workspace_id": tenant.workspace.id, **params}


def test_ranked_by_score_ties_by_id_not_yet_scored_last(read, acme):
    low = add_account(acme, "acct_low")
    tie_b = add_account(acme, "acct_tie_b")
    top = add_account(acme, "acct_top")
    new = add_account(acme, "acct_new")
    tie_a = add_account(acme, "acct_tie_a")
    score_account(acme.workspace, low, 10)
    score_account(acme.workspace, tie_a, 50)
    score_account(acme.workspace, tie_b, 50)
    score_account(acme.workspace, top, 90)

    body = read(acme, "/v2/accounts", workspace_id=acme.workspace.id).json()

    expected = [top, *sorted([tie_a, tie_b], key=lambda a: a.id), low, new]
    assert [a["id"] for a in body["data"]] == [a.id for a in expected]
    assert [a["engagement_score"] for a in body["data"]] == [90, 50, 50, 10, 0]
    assert body["pagination"]["total"] == 5


def test_record_has_id_tracking_id_links_and_every_metric(read, acme):
    account = add_account(acme, "acct_1", name="Acme Corp")
    score_account(
        acme.workspace,
        account,
        72,
        score_change=-5,
        raw_score=31.0,
        active_users=3,
        total_users=4,
        active_user_share=0.75,
        active_days=12,
        adoption=0.4,
        events_in_window=31,
        last_seen=timezone.now(),
        score_breakdown=[{"event": "Report_Created", "count": 31, "weight": 1, "points": 31}],
    )

    scored_peers(acme, "account", [10, 20, 30, 90])  # 3 of the 4 others score lower

    body = read(acme, "/v2/accounts", workspace_id=acme.workspace.id).json()
    record = next(found for found in body["data"] if found["id"] == account.id)

    assert METRICS <= set(record)
    assert record["id"] == account.id
    assert record["tracking_id"] == "acct_1"
    assert record["name"] == "Acme Corp"
    assert record["workspace_id"] == acme.workspace.id
    assert record["engagement_score"] == 72
    assert record["score_change"] == -5
    assert record["percentile_rank"] == 75.0
    assert record["active_users"] == 3
    assert record["total_users"] == 4
    assert record["active_user_share"] == 0.75
    assert record["score_breakdown"] == [
        {"event": "Report_Created", "count": 31, "weight": 1, "points": 31.0}
    ]
    assert record["scored_at"] is not None
    assert record["_links"]["self"] == (
        f"http://testserver/v2/accounts/{account.id}?workspace_id={acme.workspace.id}"
    )
    assert "traits" not in record and "segments" not in record


def test_pagination_links_walk_the_ranking(read, acme):
    accounts = [add_account(acme, f"acct_{n}") for n in range(5)]
    for n, account in enumerate(accounts):
        score_account(acme.workspace, account, 10 * (n + 1))

    first = read(acme, "/v2/accounts", workspace_id=acme.workspace.id, limit=2).json()
    assert [a["tracking_id"] for a in first["data"]] == ["acct_4", "acct_3"]
    assert first["pagination"] == {"limit": 2, "offset": 0, "total": 5}
    assert first["_links"]["prev"] is None
    assert first["_links"]["self"] == (
        f"http://testserver/v2/accounts?workspace_id={acme.workspace.id}&limit=2"
    )
    next_url = first["_links"]["next"]
    assert "offset=2" in next_url and "limit=2" in next_url

    second = read(acme, next_url).json()
    assert [a["tracking_id"] for a in second["data"]] == ["acct_2", "acct_1"]
    last = read(acme, second["_links"]["next"]).json()
    assert [a["tracking_id"] for a in last["data"]] == ["acct_0"]
    assert last["_links"]["next"] is None
    assert "offset" not in read(acme, last["_links"]["prev"]).json()["_links"]["prev"]


def test_a_page_spanning_scored_and_not_yet_scored_accounts(read, acme):
    scored = [add_account(acme, f"acct_s{n}") for n in range(3)]
    for n, account in enumerate(scored):
        score_account(acme.workspace, account, 30 - n)
    new = [add_account(acme, f"acct_n{n}") for n in range(3)]

    body = read(acme, "/v2/accounts", workspace_id=acme.workspace.id, limit=3, offset=2).json()
    assert [a["id"] for a in body["data"]] == [scored[2].id, new[0].id, new[1].id]
    body = read(acme, "/v2/accounts", workspace_id=acme.workspace.id, limit=3, offset=4).json()
    assert [a["id"] for a in body["data"]] == [new[1].id, new[2].id]
    assert body["pagination"]["total"] == 6


def test_not_yet_scored_accounts_respect_the_account_filter(read, acme):
    workspace = Workspace.objects.create(
        product=acme.product, name="Pro", account_filter={"plan": "pro"}
    )
    pro = add_account(acme, "acct_pro", plan="pro")
    add_account(acme, "acct_free", plan="free")

    body = read(acme, "/v2/accounts", workspace_id=workspace.id).json()

    assert [a["id"] for a in body["data"]] == [pro.id]
    assert body["pagination"]["total"] == 1


def test_workspace_id_is_required(read, acme):
    response = read(acme, "/v2/accounts")

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_parameters"
    assert list(body["fields"]) == ["workspace_id"]


def test_workspace_id_must_be_a_number(read, acme):
    response = read(acme, "/v2/accounts", workspace_id="abc")

    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["workspace_id"]


def test_another_products_workspace_is_404(read, acme, globex):
    add_account(globex, "acct_globex")

    response = read(acme, "/v2/accounts", workspace_id=globex.workspace.id)

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_list_expand_traits_and_segments(read, acme):
    account = add_account(acme, "acct_1", plan="pro", **{"am.status": "active"})
    score_account(acme.workspace, account, 10)
    segment = add_segment(acme.workspace, "Engaged")
    joined = timezone.now() - timedelta(hours=2)
    join(segment, account=account, joined_at=joined)

    record = read(
        acme, "/v2/accounts", workspace_id=acme.workspace.id, expand="traits,segments"
    ).json()["data"][0]

    assert record["traits"] == {"plan": "pro", "am.status": "active"}
    assert [(s["id"], s["name"]) for s in record["segments"]] == [(segment.id, "Engaged")]
    assert record["segments"][0]["joined_at"].startswith(joined.strftime("%Y-%m-%dT%H:%M"))


def test_list_query_count_does_not_grow_with_the_page(read, acme, django_assert_max_num_queries):
    segment = add_segment(acme.workspace, "All")
    for n in range(30):
        account = add_account(acme, f"acct_{n}", name=f"Account {n}")
        if n < 25:
            score_account(acme.workspace, account, n)
        join(segment, account=account, joined_at=timezone.now())

    # token, token touch, workspace (+ weights), counts x2, ids, rows, unscored, segments,
    # the workspace's features and activation steps, the page's parents and children, and
    # the first seen of those without a stored point yesterday (score_yesterday), and the
    # percentile ranks' histogram (the scoring state; with no refresh run here, a count too)
    with django_assert_max_num_queries(17):
        response = read(
            acme,
            "/v2/accounts",
            workspace_id=acme.workspace.id,
            limit=100,
            expand="traits,segments",
        )
    assert len(response.json()["data"]) == 30


def test_detail_has_the_full_metric_set(read, acme):
    account = add_account(acme, "acct_1")
    score_account(acme.workspace, account, 64, active_users=2, total_users=5)

    response = read(acme, f"/v2/accounts/{account.id}")

    assert response.status_code == 200
    body = response.json()
    assert METRICS <= set(body)
    assert body["workspace_id"] == acme.workspace.id  # the product's first workspace
    assert body["engagement_score"] == 64
    assert body["total_users"] == 5


def test_detail_in_another_workspace_of_the_product(read, acme):
    other = Workspace.objects.create(product=acme.product, name="Second", lookback_days=7)
    account = add_account(acme, "acct_1")
    score_account(acme.workspace, account, 64)
    score_account(other, account, 12)

    body = read(acme, f"/v2/accounts/{account.id}", workspace_id=other.id).json()

    assert body["workspace_id"] == other.id
    assert body["engagement_score"] == 12


def test_detail_of_an_account_not_scored_yet_answers_zeros(read, acme):
    account = add_account(acme, "acct_new")

    body = read(acme, f"/v2/accounts/{account.id}").json()

    assert body["engagement_score"] == 0
    assert body["raw_score"] == 0
    assert body["active_users"] == 0
    assert body["score_breakdown"] == []
    assert body["last_seen"] is None
    assert body["scored_at"] is None


def test_tenure_from_created_at_trait_else_first_seen(read, acme):
    created = (timezone.now() - timedelta(days=40)).isoformat()
    with_trait = add_account(acme, "acct_old", createdAt=created)
    without = add_account(acme, "acct_fresh")

    assert read(acme, f"/v2/accounts/{with_trait.id}").json()["tenure_days"] == 40
    assert read(acme, f"/v2/accounts/{without.id}").json()["tenure_days"] == 0


def test_detail_expand_traits_and_segments(read, acme):
    account = add_account(acme, "acct_1", plan="pro")
    user = add_user(acme, "usr_1")
    link(user, account)
    segment = add_segment(acme.workspace, "Pro accounts")
    join(segment, account=account, joined_at=timezone.now())

    body = read(acme, f"/v2/accounts/{account.id}", expand="segments,traits").json()

    assert body["traits"] == {"plan": "pro"}
    assert [s["name"] for s in body["segments"]] == ["Pro accounts"]
    assert body["segments"][0]["_links"]["self"].endswith(f"/v2/segments/{segment.id}")


def test_another_products_account_is_404(read, acme, globex):
    theirs = add_account(globex, "acct_globex")
    score_account(globex.workspace, theirs, 99)

    assert read(acme, f"/v2/accounts/{theirs.id}").status_code == 404
    # nor through their workspace id
    assert (
        read(acme, f"/v2/accounts/{theirs.id}", workspace_id=globex.workspace.id).status_code == 404
    )
    mine = add_account(acme, "acct_mine")
    assert (
        read(acme, f"/v2/accounts/{mine.id}", workspace_id=globex.workspace.id).status_code == 404
    )


def test_tenure_stored_by_the_engine_wins(read, acme):
    account = add_account(acme, "acct_1", createdAt="2001-01-01")
    score_account(acme.workspace, account, 10, tenure_days=123, previous_score=4, score_change=6)

    body = read(acme, f"/v2/accounts/{account.id}").json()

    assert body["tenure_days"] == 123
    assert (body["previous_score"], body["score_change"]) == (4, 6)


def test_list_totals_are_cached_briefly_and_refresh_when_the_workspace_changes(
    settings, read, acme
):
    settings.READ_API_COUNTS_CACHE_SECONDS = 60
    add_account(acme, "acct_1")
    assert (
        read(acme, "/v2/accounts", workspace_id=acme.workspace.id).json()["pagination"]["total"]
        == 1
    )

    add_account(acme, "acct_2")
    cached = read(acme, "/v2/accounts", workspace_id=acme.workspace.id).json()
    assert cached["pagination"]["total"] == 1

    acme.workspace.save()  # new settings: a fresh count
    fresh = read(acme, "/v2/accounts", workspace_id=acme.workspace.id).json()
    assert fresh["pagination"]["total"] == 2
    assert len(fresh["data"]) == 2


def test_record_matches_its_documented_fields(read, acme):
    account = add_account(acme, "acct_1")
    score_account(acme.workspace, account, 10)
    expanded = read(acme, f"/v2/accounts/{account.id}", expand="traits,segments").json()
    plain = read(acme, f"/v2/accounts/{account.id}").json()

    documented = set(AccountSerializer().fields)
    assert set(expanded) == documented
    assert set(plain) == documented - {"traits", "segments"}


def test_deep_pages_from_rank_bookmarks_match_the_ranking(read, acme, settings, monkeypatch):
    """Pages past the first bookmark start from it; every page must equal the plain ranking."""
    monkeypatch.setattr("engagement.ranking.BOOKMARK_EVERY", 3)
    settings.READ_API_COUNTS_CACHE_SECONDS = 60
    scores = [50, 20, 50, 90, 20, 20, 50, 10, 20, 0, 90, 20, 5, 50]  # many ties
    accounts = [add_account(acme, f"acct_{n}") for n in range(len(scores))]
    for account, score in zip(accounts, scores, strict=True):
        score_account(acme.workspace, account, score)
    new = add_account(acme, "acct_new")  # not scored yet: last
    expected = [
        a.id for a, _ in sorted(zip(accounts, scores, strict=True), key=lambda p: (-p[1], p[0].id))
    ]
    expected.append(new.id)

    for limit in (1, 2, 4, 5):
        for offset in range(0, len(expected) + 1):
            body = read(
                acme, "/v2/accounts", workspace_id=acme.workspace.id, limit=limit, offset=offset
            ).json()
            assert [a["id"] for a in body["data"]] == expected[offset : offset + limit], (
                limit,
                offset,
            )


def test_a_first_scoring_never_leaves_an_empty_page_under_a_cached_total(settings, read, acme):
    # The split between scored and not-yet-scored accounts was cached across the first refresh:
    # the page looked for the account among the unscored ones, where it no longer was.
    settings.READ_API_COUNTS_CACHE_SECONDS = 60
    apply(acme, group("usr_ann", "acct_1"), track("usr_ann", "Login", account="acct_1"))
    before = read(acme, "/v2/accounts", workspace_id=acme.workspace.id).json()
    assert [a["tracking_id"] for a in before["data"]] == ["acct_1"]

    workspace_rescore(workspace_id=acme.workspace.id)

    after = read(acme, "/v2/accounts", workspace_id=acme.workspace.id).json()
    assert after["pagination"]["total"] == 1
    assert [(a["tracking_id"], a["engagement_score"]) for a in after["data"]] == [("acct_1", 100)]
    users = read(acme, "/v2/users", workspace_id=acme.workspace.id).json()
    assert [u["tracking_id"] for u in users["data"]] == ["usr_ann"]
