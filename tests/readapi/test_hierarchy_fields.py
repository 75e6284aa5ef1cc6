"""Account records carry `parent` and a link to their children (issue 32 §5), on the list and
the single record; the children link lists the accounts right under the account, ranked."""

import pytest

from engagement.scoring import workspace_rescore
from tests.engagement.helpers import apply, group, track

pytestmark = pytest.mark.both_databases


@pytest.fixture
def company(acme):
    """Globex (a company) > Globex EU (a workspace) > Project X and Project Y; Ann works in
    Project X, Bo in Project Y, and only Bo did anything."""
    apply(
        acme,
        group("ann", "globex-eu", {"parent_group_id": "globex"}),
        group("ann", "project-x", {"parent_group_id": "globex-eu"}),
        group("bo", "project-y", {"parent_group_id": "globex-eu"}),
        track("bo", "Report Created", account="project-y"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    return acme


def test_records_name_their_parent_and_link_their_children(read, company):
    listed = read(company, "/v2/accounts", workspace_id=company.workspace.id).json()["data"]
    accounts = {a["tracking_id"]: a for a in listed}

    assert accounts["globex"]["parent"] is None
    eu = accounts["globex-eu"]
    assert eu["parent"] == {"id": accounts["globex"]["id"], "tracking_id": "globex"}
    assert accounts["project-x"]["parent"] == {"id": eu["id"], "tracking_id": "globex-eu"}

    one = read(company, f"/v2/accounts/{eu['id']}", workspace_id=company.workspace.id).json()
    assert one["parent"] == eu["parent"]
    children = read(company, one["_links"]["children"]).json()
    assert [c["tracking_id"] for c in children["data"]] == ["project-y", "project-x"]  # by score
    assert children["pagination"]["total"] == 2


def test_the_children_of_an_account_of_another_product_are_not_found(read, company, globex):
    other = read(globex, "/v2/accounts", workspace_id=globex.workspace.id)
    assert other.status_code == 200
    eu_id = read(company, "/v2/accounts", workspace_id=company.workspace.id).json()["data"][0]["id"]

    response = read(globex, "/v2/accounts", workspace_id=globex.workspace.id, parent_id=eu_id)

    assert response.status_code == 404
