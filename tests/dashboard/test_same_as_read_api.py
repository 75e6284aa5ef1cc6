"""The dashboard and the read API present a record alike: the same account name (the read API's
`name`, or the tracking id where it has none) and the same last-seen time for the same account
and the same user (engagement.presentation defines both once)."""

import re
from datetime import datetime

import pytest

from engagement.models import Account, User
from engagement.scoring import workspace_rescore
from tests.dashboard.conftest import signed_in
from tests.engagement.helpers import apply, group, identify, track

# The header tile of an account's or a user's page: `<time datetime="...">` or "never".
HEADER_LAST_SEEN = re.compile(
    r'<span class="figure">(?:<time datetime="([^"]+)">[^<]*</time>|never)</span> last seen'
)
HEADING = re.compile(r"<h1>(.*?) <span")


@pytest.fixture
def records(acme):
    """Ann uses the product (events two days ago, scored; one more now, applied but not scored
    yet); Dan only identified himself. Accounts: one named, one with no name trait, one whose
    name is a number, one whose name is empty."""
    apply(
        acme,
        identify("ann", {"email": "ann@initech.example"}),
        identify("dan", {"email": "dan@initech.example", "firstName": "Dan"}),
        group("ann", "initech", {"name": "Initech", "plan": "enterprise"}),
        group("dan", "initech"),
        group("ann", "nameless", {"plan": "free"}),
        group("ann", "numbered", {"name": 42}),
        group("ann", "blank", {"name": ""}),
        track("ann", "Report_Created", days_ago=2, times=3, account="initech"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    apply(acme, track("ann", "Report_Created", account="initech"))
    return acme


def _api(api_client, tenant, path: str) -> dict:
    response = api_client.get(
        path, {"workspace_id": tenant.workspace.id}, HTTP_AUTHORIZATION=tenant.bearer
    )
    assert response.status_code == 200
    return response.json()


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _page(client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200
    return response.content.decode()


def _header_last_seen(html: str) -> datetime | None:
    return _time(HEADER_LAST_SEEN.search(html).group(1))


@pytest.mark.parametrize("tracking_id", ["initech", "nameless", "numbered", "blank"])
def test_an_account_has_the_same_name_and_last_seen_time(records, vera, api_client, tracking_id):
    account = Account.objects.get(product=records.product, tracking_id=tracking_id)
    api = _api(api_client, records, f"/v2/accounts/{account.id}")
    client = signed_in(vera)
    page = _page(client, f"/w/{records.workspace.id}/accounts/{account.id}/")
    shown = api["name"] or tracking_id
    assert HEADING.search(page).group(1) == shown
    listed = client.get(f"/w/{records.workspace.id}/accounts/").context["page"].rows
    row = next(row for row in listed if row.id == account.id)
    assert (row.name or row.tracking_id) == shown
    assert _header_last_seen(page) == _time(api["last_seen"]) == row.last_seen


def test_the_account_names_the_read_api_serves(records, api_client):
    """Only a non-empty string is a name: a number or an empty string is none (null)."""
    names = {}
    for account in Account.objects.filter(product=records.product):
        names[account.tracking_id] = _api(api_client, records, f"/v2/accounts/{account.id}")["name"]
    assert names == {"initech": "Initech", "nameless": None, "numbered": None, "blank": None}


@pytest.mark.parametrize("tracking_id", ["ann", "dan"])
def test_a_user_has_the_same_last_seen_time(records, vera, api_client, tracking_id):
    user = User.objects.get(product=records.product, tracking_id=tracking_id)
    api = _api(api_client, records, f"/v2/users/{user.id}")
    client = signed_in(vera)
    page = _page(client, f"/w/{records.workspace.id}/users/{user.id}/")
    initech = Account.objects.get(product=records.product, tracking_id="initech")
    on_account = client.get(f"/w/{records.workspace.id}/accounts/{initech.id}/").context["users"]
    listed = next(item for item in on_account if item.id == user.id)
    assert _header_last_seen(page) == _time(api["last_seen"]) == listed.last_seen
    # Ann's latest event is applied but not scored yet: both show it; Dan was never seen.
    assert (api["last_seen"] is None) == (tracking_id == "dan")
    assert _time(api["last_seen"]) == user.last_seen_at


def test_trait_values_read_alike_on_the_dashboard_and_in_the_admin(acme, vera, admin_client):
    """A trait that is not a string shows as its JSON text everywhere (`true`, not `True`); the
    marketplace license's `am.` traits are grouped apart on both."""
    traits = {"trial": True, "seats": 5, "meta": {"b": 1, "a": "x"}, "am.tier": "10 Users"}
    apply(acme, identify("ann", {}), group("ann", "initech", {"name": "Initech", **traits}))
    account = Account.objects.get(product=acme.product, tracking_id="initech")
    context = signed_in(vera).get(f"/w/{acme.workspace.id}/accounts/{account.id}/").context
    expected_own = [
        ("meta", '{"a": "x", "b": 1}'),
        ("name", "Initech"),
        ("seats", "5"),
        ("trial", "true"),
    ]
    assert context["own_traits"] == expected_own
    assert context["license_traits"] == [("am.tier", "10 Users")]
    admin = admin_client.get(f"/admin/engagement/account/{account.id}/change/").content.decode()
    for _, text in expected_own[2:]:
        assert f'word-break: break-word">{text}</td>' in admin
    assert "True" not in admin.split("traits-table", 1)[1]
