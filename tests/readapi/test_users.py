"""GET /v2/users (ranked list, lookup by email or tracking id) and /v2/users/{id}."""

from datetime import timedelta

from django.utils import timezone

from engagement.models import Workspace
from readapi.serializers import UserSerializer
from tests.readapi.conftest import add_segment, add_user, join, score_user, scored_peers

USER_METRICS = {
    "engagement_score",
    "score_change",
    "percentile_rank",
    "raw_score",
    "active_days",
    "adoption",
    "events_in_window",
    "last_seen",
    "tenure_days",
    "score_breakdown",
}


def test_list_ranked_by_score_not_yet_scored_last(read, acme):
    quiet = add_user(acme, "usr_quiet")
    busy = add_user(acme, "usr_busy")
    new = add_user(acme, "usr_new")
    score_user(acme.workspace, quiet, 5)
    score_user(acme.workspace, busy, 80)

    body = read(acme, "/v2/users", workspace_id=acme.workspace.id).json()

    assert [u["id"] for u in body["data"]] == [busy.id, quiet.id, new.id]
    assert body["pagination"]["total"] == 3
    assert body["data"][2]["engagement_score"] == 0


def test_record_fields(read, acme):
    user = add_user(acme, "usr_1", email="ada@acme.test", createdAt="2020-01-01")
    score_user(acme.workspace, user, 42, active_days=4)
    scored_peers(acme, "user", [10, 20, 30, 90])  # 3 of the 4 others score lower

    body = read(acme, "/v2/users", workspace_id=acme.workspace.id).json()
    record = next(found for found in body["data"] if found["id"] == user.id)

    assert USER_METRICS <= set(record)
    assert record["id"] == user.id
    assert record["tracking_id"] == "usr_1"
    assert record["email"] == "ada@acme.test"
    assert record["engagement_score"] == 42
    assert record["percentile_rank"] == 75.0
    assert record["tenure_days"] >= 365 * 5  # from the createdAt trait
    assert record["_links"]["self"] == (
        f"http://testserver/v2/users/{user.id}?workspace_id={acme.workspace.id}"
    )
    assert "active_users" not in record  # account-only metrics do not apply


def test_lookup_by_email(read, acme, globex):
    ada = add_user(acme, "usr_ada", email="ada@acme.test")
    add_user(acme, "usr_bob", email="bob@acme.test")
    add_user(globex, "usr_ada_globex", email="ada@acme.test")
    score_user(acme.workspace, ada, 33)

    body = read(
        acme,
        "/v2/users",
        workspace_id=acme.workspace.id,
        match_type="email",
        match_value="ada@acme.test",
    ).json()

    assert [u["id"] for u in body["data"]] == [ada.id]
    assert body["data"][0]["engagement_score"] == 33
    assert body["pagination"]["total"] == 1


def test_lookup_by_tracking_id(read, acme):
    add_user(acme, "usr_1")
    target = add_user(acme, "usr_2")

    body = read(
        acme,
        "/v2/users",
        workspace_id=acme.workspace.id,
        match_type="tracking_id",
        match_value="usr_2",
    ).json()

    assert [u["id"] for u in body["data"]] == [target.id]


def test_lookup_with_no_match_is_an_empty_page(read, acme):
    add_user(acme, "usr_1", email="ada@acme.test")

    response = read(
        acme,
        "/v2/users",
        workspace_id=acme.workspace.id,
        match_type="email",
        match_value="nobody@acme.test",
    )

    assert response.status_code == 200
    assert response.json()["data"] == []
    assert response.json()["pagination"]["total"] == 0


def test_match_type_without_match_value_is_400(read, acme):
    response = read(acme, "/v2/users", workspace_id=acme.workspace.id, match_type="email")

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "missing_match_parameter"
    assert list(body["fields"]) == ["match_value"]


def test_match_value_without_match_type_is_400(read, acme):
    response = read(acme, "/v2/users", workspace_id=acme.workspace.id, match_value="x@y.z")

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "missing_match_parameter"
    assert list(body["fields"]) == ["match_type"]


def test_unknown_match_type_is_400(read, acme):
    response = read(
        acme, "/v2/users", workspace_id=acme.workspace.id, match_type="phone", match_value="1"
    )

    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["match_type"]


def test_workspace_id_is_required(read, acme):
    response = read(acme, "/v2/users", match_type="email", match_value="ada@acme.test")

    assert response.status_code == 400
    assert "workspace_id" in response.json()["fields"]


def test_another_products_workspace_is_404(read, acme, globex):
    response = read(acme, "/v2/users", workspace_id=globex.workspace.id)
    assert response.status_code == 404


def test_list_query_count_does_not_grow_with_the_page(read, acme, django_assert_max_num_queries):
    segment = add_segment(acme.workspace, "Users", target="users")
    for n in range(30):
        user = add_user(acme, f"usr_{n}")
        if n % 2:
            score_user(acme.workspace, user, n)
        join(segment, user=user, joined_at=timezone.now())

    # As for accounts, plus one each for the workspace's features and activation steps, and
    # two for the percentile ranks' histogram (the scoring state; with no refresh run, a count).
    with django_assert_max_num_queries(15):
        response = read(
            acme,
            "/v2/users",
            workspace_id=acme.workspace.id,
            limit=100,
            expand="traits,segments",
        )
    assert len(response.json()["data"]) == 30
    assert all(len(u["segments"]) == 1 for u in response.json()["data"])


def test_detail(read, acme):
    user = add_user(acme, "usr_1", email="ada@acme.test", role="admin")
    score_user(acme.workspace, user, 55, score_change=7, events_in_window=12)

    response = read(acme, f"/v2/users/{user.id}", expand="traits")

    assert response.status_code == 200
    body = response.json()
    assert USER_METRICS <= set(body)
    assert body["engagement_score"] == 55
    assert body["score_change"] == 7
    assert body["events_in_window"] == 12
    assert body["traits"] == {"email": "ada@acme.test", "role": "admin"}
    assert body["tenure_days"] == 3  # no createdAt: since first seen


def test_detail_in_a_given_workspace(read, acme):
    other = Workspace.objects.create(product=acme.product, name="Second")
    user = add_user(acme, "usr_1")
    score_user(other, user, 9)

    assert read(acme, f"/v2/users/{user.id}", workspace_id=other.id).json()["engagement_score"] == 9
    assert read(acme, f"/v2/users/{user.id}").json()["engagement_score"] == 0


def test_detail_not_scored_yet_answers_zeros_and_last_seen_event(read, acme):
    user = add_user(acme, "usr_1")
    seen = timezone.now() - timedelta(hours=1)
    user.last_seen_at = seen
    user.save()

    body = read(acme, f"/v2/users/{user.id}").json()

    assert body["engagement_score"] == 0
    assert body["score_breakdown"] == []
    assert body["scored_at"] is None
    assert body["last_seen"].startswith(seen.strftime("%Y-%m-%dT%H:%M"))


def test_detail_expand_segments(read, acme):
    user = add_user(acme, "usr_1")
    segment = add_segment(acme.workspace, "Power users", target="users")
    join(segment, user=user, joined_at=timezone.now())

    body = read(acme, f"/v2/users/{user.id}", expand="segments").json()

    assert [s["name"] for s in body["segments"]] == ["Power users"]
    assert "traits" not in body


def test_another_products_user_is_404(read, acme, globex):
    theirs = add_user(globex, "usr_globex")

    response = read(acme, f"/v2/users/{theirs.id}")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_record_matches_its_documented_fields(read, acme):
    user = add_user(acme, "usr_1")
    expanded = read(acme, f"/v2/users/{user.id}", expand="traits,segments").json()

    assert set(expanded) == set(UserSerializer().fields)


def test_deep_user_pages_from_rank_bookmarks(read, acme, settings, monkeypatch):
    monkeypatch.setattr("engagement.ranking.BOOKMARK_EVERY", 2)
    settings.READ_API_COUNTS_CACHE_SECONDS = 60
    scores = [7, 3, 7, 7, 1, 3, 9]
    users = [add_user(acme, f"usr_{n}") for n in range(len(scores))]
    for user, score in zip(users, scores, strict=True):
        score_user(acme.workspace, user, score)
    expected = [
        u.id for u, _ in sorted(zip(users, scores, strict=True), key=lambda p: (-p[1], p[0].id))
    ]

    for offset in range(len(expected)):
        body = read(
            acme, "/v2/users", workspace_id=acme.workspace.id, limit=3, offset=offset
        ).json()
        assert [u["id"] for u in body["data"]] == expected[offset : offset + 3], offset
