"""GET /v2/segments, /v2/segments/{id} and /v2/segments/{id}/members."""

from datetime import timedelta

from django.utils import timezone

from engagement.models import Segment, Workspace
from engagement.segments import segments_refresh
from tests.readapi.conftest import add_account, add_segment, add_user, join


def test_list_a_workspaces_segments(read, acme, globex):
    engaged = add_segment(acme.workspace, "Engaged")
    at_risk = add_segment(acme.workspace, "At risk")
    other_ws = Workspace.objects.create(product=acme.product, name="Second")
    add_segment(other_ws, "Elsewhere")
    add_segment(globex.workspace, "Globex's")
    join(engaged, account=add_account(acme, "acct_1"), joined_at=timezone.now())

    body = read(acme, "/v2/segments", workspace_id=acme.workspace.id).json()

    # The built-in segments every workspace starts with come first.
    builtin = list(acme.workspace.segments.filter(builtin=True).order_by("id"))
    assert [s["id"] for s in body["data"]] == [*(s.id for s in builtin), engaged.id, at_risk.id]
    assert [s["builtin"] for s in body["data"]] == [True] * len(builtin) + [False, False]
    assert body["data"][0]["match"] == "all"
    assert body["pagination"]["total"] == len(builtin) + 2
    first = body["data"][len(builtin)]
    assert first["name"] == "Engaged"
    assert first["target"] == "accounts"
    assert first["workspace_id"] == acme.workspace.id
    assert first["member_count"] == 1
    assert first["conditions"] == [
        {"field": "metric:engagement_score", "operator": "greater_than", "value": 5}
    ]
    assert first["_links"]["members"] == (f"http://testserver/v2/segments/{engaged.id}/members")


def test_list_requires_workspace_id(read, acme):
    response = read(acme, "/v2/segments")
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["workspace_id"]


def test_list_of_another_products_workspace_is_404(read, acme, globex):
    add_segment(globex.workspace, "Globex's")
    assert read(acme, "/v2/segments", workspace_id=globex.workspace.id).status_code == 404


def test_detail(read, acme):
    segment = add_segment(acme.workspace, "Engaged", target="users")

    body = read(acme, f"/v2/segments/{segment.id}").json()

    assert body["id"] == segment.id
    assert body["target"] == "users"
    assert body["member_count"] == 0


def test_another_products_segment_is_404(read, acme, globex):
    theirs = add_segment(globex.workspace, "Globex's")

    assert read(acme, f"/v2/segments/{theirs.id}").status_code == 404
    assert read(acme, f"/v2/segments/{theirs.id}/members").status_code == 404


def test_members_latest_joined_first_with_joined_at(read, acme):
    segment = add_segment(acme.workspace, "Engaged")
    now = timezone.now()
    early = add_account(acme, "acct_early")
    late = add_account(acme, "acct_late")
    join(segment, account=early, joined_at=now - timedelta(days=2))
    join(segment, account=late, joined_at=now - timedelta(hours=1))

    body = read(acme, f"/v2/segments/{segment.id}/members").json()

    assert [m["id"] for m in body["data"]] == [late.id, early.id]
    member = body["data"][1]
    assert member["type"] == "account"
    assert member["tracking_id"] == "acct_early"
    assert member["joined_at"].startswith((now - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M"))
    assert member["_links"]["self"] == (
        f"http://testserver/v2/accounts/{early.id}?workspace_id={acme.workspace.id}"
    )
    assert body["pagination"] == {"limit": 20, "offset": 0, "total": 2}


def test_user_members(read, acme):
    segment = add_segment(acme.workspace, "Power users", target="users")
    user = add_user(acme, "usr_1")
    join(segment, user=user, joined_at=timezone.now())

    member = read(acme, f"/v2/segments/{segment.id}/members").json()["data"][0]

    assert (member["id"], member["type"], member["tracking_id"]) == (user.id, "user", "usr_1")
    assert f"/v2/users/{user.id}?" in member["_links"]["self"]


def test_members_page(read, acme, django_assert_max_num_queries):
    segment = add_segment(acme.workspace, "Everyone")
    now = timezone.now()
    for n in range(25):
        join(segment, account=add_account(acme, f"acct_{n}"), joined_at=now - timedelta(minutes=n))

    with django_assert_max_num_queries(6):
        body = read(acme, f"/v2/segments/{segment.id}/members", limit=10, offset=20).json()

    assert [m["tracking_id"] for m in body["data"]] == [f"acct_{n}" for n in range(20, 25)]
    assert body["_links"]["next"] is None
    assert "offset=10" in body["_links"]["prev"]


def test_a_broken_segment_says_so_and_why(read, acme):
    """Conditions stored past the checks that cannot be evaluated: the refresh marks the segment
    broken, and the API shows it, with the reason; fine segments say broken false, reason null."""
    fine = add_segment(acme.workspace, "Engaged")
    broken = add_segment(acme.workspace, "Probe")
    Segment.objects.filter(id=broken.id).update(
        conditions=[{"field": "metric:last_seen", "operator": "within_last_days", "value": 10**6}]
    )
    segments_refresh(workspace_id=acme.workspace.id)

    body = read(acme, f"/v2/segments/{broken.id}").json()
    assert body["broken"] is True
    assert body["broken_reason"].startswith("conditions[0]")
    listed = read(acme, "/v2/segments", workspace_id=acme.workspace.id).json()["data"]
    by_id = {s["id"]: s for s in listed}
    assert (by_id[broken.id]["broken"], by_id[broken.id]["broken_reason"]) == (
        True,
        body["broken_reason"],
    )
    assert (by_id[fine.id]["broken"], by_id[fine.id]["broken_reason"]) == (False, None)
