"""A group call's `parent_group_id` over HTTP (issue 32 §5): checked where it comes in, applied
by the drain, and a link the drain refuses is in the drop log with its reason while the rest of
the call is applied."""

import pytest

from engagement.models import Account
from ingestion.models import DroppedRequest

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def group(account: str, parent, **traits) -> dict:
    return {"groupId": account, "userId": "ann", "traits": {"parent_group_id": parent, **traits}}


def test_a_group_call_links_the_account_under_its_parent(acme, post_json, drain):
    assert post_json("/v2/group", group("project-x", "globex"), auth=acme.basic).status_code == 202
    drain()

    child = Account.objects.get(product=acme.product, tracking_id="project-x")
    assert child.parent.tracking_id == "globex"


def test_a_link_that_closes_a_cycle_is_a_drop_with_its_reason(acme, post_json, drain):
    post_json("/v2/group", group("project-x", "globex"), auth=acme.basic)
    drain()

    response = post_json("/v2/group", group("globex", "project-x", plan="pro"), auth=acme.basic)
    assert response.status_code == 202
    drain()

    company = Account.objects.get(product=acme.product, tracking_id="globex")
    assert company.parent is None
    assert company.traits["plan"] == "pro"  # the call's other changes were applied
    [drop] = DroppedRequest.objects.filter(product=acme.product)
    assert drop.reason == DroppedRequest.Reason.PARENT_REFUSED
    assert drop.endpoint == "v2/group"
    assert "'globex'" in drop.detail and "cycle" in drop.detail


@pytest.mark.parametrize(
    ("parent", "problem"),
    [(42, "Must be a string."), ("   ", "Must not be empty."), ("x" * 256, "at most 255")],
)
def test_a_parent_id_the_service_cannot_store_is_refused_at_the_door(
    acme, post_json, drain, parent, problem
):
    response = post_json("/v2/group", group("project-x", parent), auth=acme.basic)

    assert response.status_code == 400
    assert problem in response.content.decode()
    drain()
    assert not Account.objects.filter(product=acme.product).exists()
