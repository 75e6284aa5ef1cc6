"""GET /v1/accounts: the legacy lookup by id, or by domain, name, tracking id or any trait."""

from tests.readapi.conftest import add_account, score_account


def lookup(read, tenant, **params):
    return read(tenant, "/v1/accounts", workspace_id=tenant.workspace.id, **params)


def test_by_id(read, acme):
    account = add_account(acme, "acct_1", name="Acme Corp")
    score_account(acme.workspace, account, 61)

    body = lookup(read, acme, id=account.id).json()

    assert [a["id"] for a in body["data"]] == [account.id]
    assert body["data"][0]["engagement_score"] == 61
    assert body["data"][0]["name"] == "Acme Corp"


def test_by_id_of_another_product_is_404(read, acme, globex):
    theirs = add_account(globex, "acct_globex")

    response = lookup(read, acme, id=theirs.id)

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_by_domain_ignores_case(read, acme, globex):
    account = add_account(acme, "acct_1", domain="acme.test")
    add_account(acme, "acct_2", domain="other.test")
    add_account(globex, "acct_g", domain="acme.test")

    body = lookup(read, acme, match_type="domain", match_value="ACME.test").json()

    assert [a["id"] for a in body["data"]] == [account.id]


def test_by_name(read, acme):
    account = add_account(acme, "acct_1", name="Acme Corp")

    body = lookup(read, acme, match_type="name", match_value="acme corp").json()

    assert [a["id"] for a in body["data"]] == [account.id]


def test_by_tracking_id(read, acme):
    add_account(acme, "acct_1")
    account = add_account(acme, "acct_2")

    body = lookup(read, acme, match_type="tracking_id", match_value="acct_2").json()

    assert [a["id"] for a in body["data"]] == [account.id]


def test_by_any_trait_including_am_traits(read, acme):
    active = add_account(acme, "acct_1", **{"am.status": "active", "seats": 25})
    add_account(acme, "acct_2", **{"am.status": "inactive"})

    by_am = lookup(read, acme, match_type="am.status", match_value="active").json()
    by_number = lookup(read, acme, match_type="seats", match_value="25").json()

    assert [a["id"] for a in by_am["data"]] == [active.id]
    assert [a["id"] for a in by_number["data"]] == [active.id]


def test_no_match_is_an_empty_page(read, acme):
    add_account(acme, "acct_1", domain="acme.test")

    response = lookup(read, acme, match_type="domain", match_value="nowhere.test")

    assert response.status_code == 200
    assert response.json()["data"] == []


def test_neither_id_nor_match_is_400(read, acme):
    response = lookup(read, acme)

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "missing_match_parameter"
    assert "id" in body["fields"]


def test_half_a_match_is_400(read, acme):
    response = lookup(read, acme, match_type="domain")

    assert response.status_code == 400
    assert response.json()["code"] == "missing_match_parameter"
    assert list(response.json()["fields"]) == ["match_value"]


def test_id_and_match_together_is_400(read, acme):
    account = add_account(acme, "acct_1")

    response = lookup(read, acme, id=account.id, match_type="tracking_id", match_value="acct_1")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_parameters"


def test_workspace_id_is_required(read, acme):
    response = read(acme, "/v1/accounts", match_type="domain", match_value="acme.test")

    assert response.status_code == 400
    assert "workspace_id" in response.json()["fields"]


def test_needs_a_token(read, acme):
    response = read(None, "/v1/accounts", workspace_id=acme.workspace.id, id=1)
    assert response.status_code == 401


def test_by_id_answers_the_list_envelope_holding_the_v2_record(read, acme):
    """Clients of the legacy lookup read a list whichever way they look up."""
    account = add_account(acme, "acct_1", name="Acme Corp")
    add_account(acme, "acct_2")
    score_account(acme.workspace, account, 61)

    body = lookup(read, acme, id=account.id).json()
    detail = read(acme, f"/v2/accounts/{account.id}").json()

    assert set(body) == {"data", "pagination", "_links"}
    assert body["pagination"] == {"limit": 20, "offset": 0, "total": 1}
    assert body["data"] == [detail]
