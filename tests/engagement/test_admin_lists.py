"""Accounts and users in the admin: name, score, change, rank and last seen of the default
workspace, sortable; search by name, email, domain and tracking id; traits as a table."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from engagement.models import AccountScore, UserScore, Workspace
from engagement.scoring import workspace_rescore
from tests.engagement.helpers import apply, group, identify, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

ACCOUNTS = reverse("admin:engagement_account_changelist")
USERS = reverse("admin:engagement_user_changelist")


@pytest.fixture
def scored(acme):
    apply(
        acme,
        identify("u1", {"name": "Ada Lovelace", "email": "ada@initech.test"}),
        identify("u2", {"firstName": "Grace", "lastName": "Hopper", "email": "grace@hooli.test"}),
        group("u1", "A1", {"name": "Initech", "domain": "initech.test"}),
        group("u2", "A2", {"name": "Hooli", "domain": "hooli.test"}),
        track("u1", "Login", account="A1", times=1),
        track("u2", "Login", account="A2", times=5),
    )
    # A second workspace of the product scoring only A1: the lists show the default one.
    other = Workspace.objects.create(
        product=acme.product, name="Initech only", account_filter={"name": "Initech"}
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    workspace_rescore(workspace_id=other.id)
    return acme


def rows(response) -> list:
    assert response.status_code == 200
    return list(response.context["cl"].result_list)


def test_accounts_show_name_domain_and_default_workspace_scores(scored, admin_client):
    page = admin_client.get(ACCOUNTS)
    listed = {a.tracking_id: a for a in rows(page)}
    for account in listed.values():
        score = AccountScore.objects.get(account=account, workspace=scored.workspace)
        assert account.default_score == score.engagement_score
        assert account.default_score_change == score.score_change
        assert account.default_last_seen == score.last_seen
    assert listed["A2"].default_score > listed["A1"].default_score
    html = page.content.decode()
    for header in ("Name", "Domain", "Score", "Change", "Rank (percentile)", "Last seen"):
        assert f">{header}</a>" in html  # sortable headers are links
    assert "Hooli" in html and "hooli.test" in html


def test_users_show_a_name_from_name_or_first_and_last_name(scored, admin_client):
    listed = {u.tracking_id: u for u in rows(admin_client.get(USERS))}
    assert listed["u1"].display_name == "Ada Lovelace"
    assert listed["u2"].display_name == "Grace Hopper"
    score = UserScore.objects.get(user=listed["u2"], workspace=scored.workspace)
    assert listed["u2"].default_score == score.engagement_score > 0


@pytest.mark.parametrize(
    ("url", "order", "expected"),
    [
        (ACCOUNTS, "-4", ["A2", "A1"]),  # score, highest first
        (ACCOUNTS, "4", ["A1", "A2"]),
        (ACCOUNTS, "2", ["A2", "A1"]),  # name: Hooli, Initech
        (ACCOUNTS, "3", ["A2", "A1"]),  # domain
        (USERS, "-4", ["u2", "u1"]),  # score
        (USERS, "2", ["u1", "u2"]),  # name: Ada, Grace
        (USERS, "-7", ["u2", "u1"]),  # last seen, latest first (u2's last event is later)
    ],
)
def test_columns_sort(scored, admin_client, url, order, expected):
    listed = [r.tracking_id for r in rows(admin_client.get(url, {"o": order}))]
    assert listed == expected


@pytest.mark.parametrize(
    ("url", "term", "expected"),
    [
        (ACCOUNTS, "hooli", ["A2"]),  # name
        (ACCOUNTS, "initech.test", ["A1"]),  # domain
        (ACCOUNTS, "A1", ["A1"]),  # tracking id
        (USERS, "lovelace", ["u1"]),  # name
        (USERS, "grace", ["u2"]),  # first name
        (USERS, "hooli.test", ["u2"]),  # email
        (USERS, "u1", ["u1"]),  # tracking id
        (USERS, "nobody", []),
    ],
)
def test_search_by_name_email_domain_and_tracking_id(scored, admin_client, url, term, expected):
    listed = [r.tracking_id for r in rows(admin_client.get(url, {"q": term}))]
    assert sorted(listed) == expected


@pytest.mark.parametrize("url", [ACCOUNTS, USERS])
def test_list_queries_do_not_grow_with_the_rows(acme, admin_client, url):
    def count_queries() -> int:
        admin_client.get(url)  # session and permission caches warm
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(url).status_code == 200
        return len(captured.captured_queries)

    apply(acme, group("u0", "A0"), track("u0", "Login", account="A0"))
    workspace_rescore(workspace_id=acme.workspace.id)
    few = count_queries()
    apply(
        acme,
        *[group(f"u{i}", f"A{i}", {"name": f"Account {i}"}) for i in range(1, 25)],
        *[track(f"u{i}", "Login", account=f"A{i}") for i in range(1, 25)],
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    assert count_queries() == few


def test_traits_are_a_table_with_the_marketplace_license_apart(acme, admin_client):
    license_traits = {f"am.field{i:02}": f"value {i}" for i in range(31)}
    apply(
        acme,
        group(
            "u1",
            "A1",
            {"name": "<script>alert(1)</script>", "seats": 12, **license_traits},
        ),
    )
    account = acme.product.accounts.get()
    page = admin_client.get(reverse("admin:engagement_account_change", args=[account.id]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    traits_at = html.index(">Traits</h3>")
    license_at = html.index(">Marketplace license</h3>")
    assert traits_at < html.index(">seats</th>") < license_at < html.index(">am.field00</th>")
    assert html.count('class="trait-key"') == 33
    assert '{"am.field00"' not in html  # no JSON paragraph
    assert 'name="_save"' not in html  # read-only: nothing to save


def test_a_users_page_shows_traits_and_accounts_read_only(acme, admin_client):
    apply(acme, identify("u1", {"email": "ada@initech.test"}), group("u1", "A1"))
    user = acme.product.users.get()
    page = admin_client.get(reverse("admin:engagement_user_change", args=[user.id]))
    assert page.status_code == 200
    html = page.content.decode()
    assert ">email</th>" in html and "ada@initech.test" in html
    assert "A1" in html  # the linked account, read-only
    assert 'name="_save"' not in html
