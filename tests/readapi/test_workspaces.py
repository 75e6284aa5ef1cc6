"""GET /v2/workspaces and /v2/workspaces/{id}."""

from engagement.models import EventWeight, Workspace
from tests.readapi.conftest import add_account, add_user, score_account


def test_list_shows_only_the_tokens_product(read, acme, globex):
    second = Workspace.objects.create(product=acme.product, name="Trial users", lookback_days=7)
    EventWeight.objects.create(workspace=second, event_name="Report_Created", weight=5)

    response = read(acme, "/v2/workspaces")

    assert response.status_code == 200
    body = response.json()
    assert [w["id"] for w in body["data"]] == [acme.workspace.id, second.id]
    assert body["pagination"] == {"limit": 20, "offset": 0, "total": 2}
    record = body["data"][1]
    assert record["name"] == "Trial users"
    assert record["lookback_days"] == 7
    assert record["event_weights"] == [{"event": "Report_Created", "weight": 5}]
    assert record["_links"]["self"] == f"http://testserver/v2/workspaces/{second.id}"
    assert record["_links"]["accounts"] == (
        f"http://testserver/v2/accounts?workspace_id={second.id}"
    )
    assert "stats" not in record


def test_list_pages(read, acme):
    Workspace.objects.create(product=acme.product, name="Second")
    Workspace.objects.create(product=acme.product, name="Third")

    body = read(acme, "/v2/workspaces", limit=2, offset=1).json()

    assert [w["name"] for w in body["data"]] == ["Second", "Third"]
    assert body["pagination"] == {"limit": 2, "offset": 1, "total": 3}
    assert body["_links"]["next"] is None
    assert body["_links"]["prev"] == "http://testserver/v2/workspaces?limit=2"


def test_detail(read, acme):
    response = read(acme, f"/v2/workspaces/{acme.workspace.id}")

    assert response.status_code == 200
    body = response.json()
    assert body["id"] == acme.workspace.id
    assert body["name"] == "Default"
    assert body["lookback_days"] == 30
    assert body["daily_event_cap"] is None
    assert body["account_filter"] == {}
    assert "stats" not in body


def test_detail_expand_stats_counts_users_and_accounts(read, acme, globex):
    scored = add_account(acme, "acct_scored")
    add_account(acme, "acct_new")
    score_account(acme.workspace, scored, 40)
    for n in range(3):
        add_user(acme, f"usr_{n}")
    add_account(globex, "acct_other")  # another product's data is never counted

    body = read(acme, f"/v2/workspaces/{acme.workspace.id}", expand="stats").json()

    assert body["stats"] == {"users": 3, "accounts": 2}


def test_stats_respect_the_account_filter(read, acme):
    workspace = Workspace.objects.create(
        product=acme.product, name="Paid", account_filter={"plan": "pro"}
    )
    add_account(acme, "acct_pro", plan="pro")
    add_account(acme, "acct_free", plan="free")

    body = read(acme, f"/v2/workspaces/{workspace.id}", expand="stats").json()

    assert body["stats"]["accounts"] == 1


def test_another_products_workspace_is_404(read, acme, globex):
    response = read(acme, f"/v2/workspaces/{globex.workspace.id}")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_unknown_expand_is_400(read, acme):
    response = read(acme, f"/v2/workspaces/{acme.workspace.id}", expand="stats,bogus")

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_parameters"
    assert "bogus" in body["fields"]["expand"][0]


def test_bad_limit_is_400_with_fields(read, acme):
    for limit in ("0", "101", "ten"):
        response = read(acme, "/v2/workspaces", limit=limit)
        assert response.status_code == 400
        assert list(response.json()["fields"]) == ["limit"]
    response = read(acme, "/v2/workspaces", offset="-1")
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["offset"]
