"""A token reads its own product only: every id of another product answers 404, never data."""

import pytest
from django.utils import timezone

from tests.readapi.conftest import add_account, add_segment, add_user, join, score_account


@pytest.fixture
def acme_ids(acme):
    account = add_account(acme, "acct_acme")
    score_account(acme.workspace, account, 50)
    user = add_user(acme, "usr_acme", email="ada@acme.test")
    segment = add_segment(acme.workspace, "Acme's")
    join(segment, account=account, joined_at=timezone.now())
    return {
        "workspace": acme.workspace.id,
        "account": account.id,
        "user": user.id,
        "segment": segment.id,
    }


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/v2/workspaces/{workspace}", {}),
        ("/v2/accounts", {"workspace_id": "{workspace}"}),
        ("/v2/accounts/{account}", {}),
        ("/v2/users", {"workspace_id": "{workspace}"}),
        (
            "/v2/users",
            {"workspace_id": "{workspace}", "match_type": "email", "match_value": "ada@acme.test"},
        ),
        ("/v2/users/{user}", {}),
        ("/v2/segments", {"workspace_id": "{workspace}"}),
        ("/v2/segments/{segment}", {}),
        ("/v2/segments/{segment}/members", {}),
        ("/v1/accounts", {"workspace_id": "{workspace}", "id": "{account}"}),
    ],
)
def test_another_products_ids_answer_404(read, acme_ids, globex, acme, path, params):
    url = path.format(**acme_ids)
    query = {key: value.format(**acme_ids) for key, value in params.items()}

    assert read(acme, url, **query).status_code == 200  # the owner can read it
    response = read(globex, url, **query)

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_globex_lists_never_show_acme_rows(read, acme_ids, globex):
    add_account(globex, "acct_globex")

    accounts = read(globex, "/v2/accounts", workspace_id=globex.workspace.id).json()["data"]
    workspaces = read(globex, "/v2/workspaces").json()["data"]

    assert [a["tracking_id"] for a in accounts] == ["acct_globex"]
    assert [w["id"] for w in workspaces] == [globex.workspace.id]
