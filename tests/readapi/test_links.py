"""Every `_links` URL is built from a route name (readapi/links.py): served under a path prefix
(SCRIPT_NAME, as a proxy mounting the service at /eds sets it), every link carries the prefix."""

from django.test.utils import override_script_prefix

from tests.readapi.conftest import add_account, score_account

BASE = "http://testserver/eds"


def read_under_prefix(api_client, tenant, path: str, **params):
    # WSGIHandler sets the script prefix from SCRIPT_NAME for each request; the test client
    # does not, so the test sets it as the server would.
    with override_script_prefix("/eds/"):
        response = api_client.get(
            path, params, SCRIPT_NAME="/eds", HTTP_AUTHORIZATION=tenant.bearer
        )
    assert response.status_code == 200, response.content
    return response.json()


def test_record_and_page_links_carry_the_path_prefix(api_client, acme):
    account = add_account(acme, "acct_1")
    score_account(acme.workspace, account, 40)
    workspace_id = acme.workspace.id

    page = read_under_prefix(api_client, acme, "/v2/accounts", workspace_id=workspace_id)
    workspace = read_under_prefix(api_client, acme, f"/v2/workspaces/{workspace_id}")

    assert page["_links"]["self"] == f"{BASE}/v2/accounts?workspace_id={workspace_id}"
    assert page["data"][0]["_links"] == {
        "self": f"{BASE}/v2/accounts/{account.id}?workspace_id={workspace_id}",
        "workspace": f"{BASE}/v2/workspaces/{workspace_id}",
        "children": f"{BASE}/v2/accounts?workspace_id={workspace_id}&parent_id={account.id}",
    }
    assert workspace["_links"] == {
        "self": f"{BASE}/v2/workspaces/{workspace_id}",
        "accounts": f"{BASE}/v2/accounts?workspace_id={workspace_id}",
        "users": f"{BASE}/v2/users?workspace_id={workspace_id}",
        "segments": f"{BASE}/v2/segments?workspace_id={workspace_id}",
    }


def test_links_without_a_prefix_are_unchanged(api_client, acme):
    workspace_id = acme.workspace.id
    response = api_client.get(
        f"/v2/workspaces/{workspace_id}", HTTP_AUTHORIZATION=acme.bearer
    ).json()

    assert response["_links"]["self"] == f"http://testserver/v2/workspaces/{workspace_id}"
    assert response["_links"]["users"] == (
        f"http://testserver/v2/users?workspace_id={workspace_id}"
    )
