"""The users list, names sorted as displayed in natural order, segment members and account users
by name, conditions in words, the favicon (issue 71, item 6)."""

import importlib

import pytest
from django.contrib.staticfiles import finders
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.test import Client

from engagement.models import Account, Segment, User
from engagement.presentation import condition_text, natural_sort_key
from engagement.scoring import workspace_rescore
from engagement.segments import segment_refresh
from engagement.services import account_prefixed_traits_replace
from tests.dashboard.conftest import signed_in
from tests.engagement.helpers import apply, group, identify, track

pytestmark = pytest.mark.both_databases


def url(workspace, path=""):
    return f"/w/{workspace.id}/{path}"


def shown(response) -> list[str]:
    """The names the list shows, in its order (a row without a name shows its tracking id)."""
    return [row.name or row.tracking_id for row in response.context["page"].rows]


# --- The users list ---------------------------------------------------------------------------


def test_the_users_list_searches_sorts_and_pages(acme, vera, scored):
    client = signed_in(vera)
    response = client.get(url(acme.workspace, "users/"))
    assert response.status_code == 200
    # Highest score first, as the accounts list: ann sent 17 events, bob 1, cy none.
    assert shown(response) == ["Ann Lee", "bob@umbrella.example", "cy@hooli.example"]
    assert b'href="/w/%d/users/%d/"' % (acme.workspace.id, scored.ann.id) in response.content
    assert b"ann@initech.example \xc2\xb7 ann" in response.content  # the email and the id beside

    by_email = client.get(url(acme.workspace, "users/"), {"q": "UMBRELLA"})
    assert shown(by_email) == ["bob@umbrella.example"]
    by_name = client.get(url(acme.workspace, "users/"), {"q": "lee"})
    assert shown(by_name) == ["Ann Lee"]
    none = client.get(url(acme.workspace, "users/"), {"q": "nobody"})
    assert none.context["page"].total == 0
    assert b"No user matches this search or filter." in none.content

    by_name_desc = client.get(url(acme.workspace, "users/"), {"sort": "name", "order": "desc"})
    assert shown(by_name_desc) == ["cy@hooli.example", "bob@umbrella.example", "Ann Lee"]
    quiet_first = client.get(url(acme.workspace, "users/"), {"sort": "score", "order": "asc"})
    assert shown(quiet_first)[0] == "cy@hooli.example"


def test_the_users_list_pages_like_the_accounts_list(acme, vera):
    apply(acme, *[identify(f"u{n}", {"name": f"User {n}"}) for n in range(1, 31)])
    client = signed_in(vera)
    first = client.get(url(acme.workspace, "users/"), {"sort": "name", "order": "asc"})
    assert first.context["page"].total == 30
    assert first.context["page"].pages == 2
    assert shown(first)[:3] == ["User 1", "User 2", "User 3"]
    assert b"page=2" in first.content
    second = client.get(url(acme.workspace, "users/"), {"sort": "name", "order": "asc", "page": 2})
    assert shown(second) == [f"User {n}" for n in range(26, 31)]
    # A bad page or sort is not an error page: the defaults.
    bad = client.get(url(acme.workspace, "users/"), {"sort": "active_users", "page": "x"})
    assert bad.status_code == 200
    assert bad.context["values"]["sort"] == "score"


def test_the_users_list_filters_by_a_users_segment_and_not_an_accounts_one(acme, vera, scored):
    leads = Segment.objects.create(
        workspace=acme.workspace,
        name="Leads",
        target=Segment.Target.USERS,
        conditions=[{"field": "trait:lastName", "operator": "equals", "value": "Lee"}],
    )
    segment_refresh(segment=leads)
    client = signed_in(vera)
    response = client.get(url(acme.workspace, "users/"), {"segment": leads.id, "sort": "name"})
    assert shown(response) == ["Ann Lee"]
    by_score = client.get(url(acme.workspace, "users/"), {"segment": leads.id})
    assert shown(by_score) == ["Ann Lee"]
    wrong = client.get(url(acme.workspace, "users/"), {"segment": scored.enterprise.id})
    assert wrong.status_code == 404


def test_the_users_list_is_scoped_and_linked_from_the_navigation_and_overview(
    acme, globex, vera, gus, scored
):
    assert signed_in(gus).get(url(acme.workspace, "users/")).status_code == 404
    assert Client().get(url(acme.workspace, "users/")).status_code == 302
    overview = signed_in(vera).get(url(acme.workspace))
    link = f'href="/w/{acme.workspace.id}/users/"'.encode()
    assert overview.content.count(link) == 2  # the navigation and the users tile


# --- Names in natural order, as displayed -----------------------------------------------------


def test_natural_sort_key_pads_digit_runs_and_lowers_case():
    assert natural_sort_key("Company 2") < natural_sort_key("company 10")
    assert natural_sort_key("A9b") == "a000000000009b"
    assert len(natural_sort_key("x" * 400)) == 255


def test_accounts_sort_by_the_displayed_name_in_natural_order(acme, vera):
    apply(
        acme,
        group("p1", "acc-b", {"name": "Company 10"}),
        group("p2", "acc-c", {"name": "company 2"}),
        group("p3", "zz-no-name"),
        group("p4", "acc-a", {"name": "Company 1"}),
        group("p5", "acc-d", {"name": 42}),  # a number is not a name: the tracking id shows
    )
    client = signed_in(vera)
    ascending = client.get(url(acme.workspace, "accounts/"), {"sort": "name", "order": "asc"})
    assert shown(ascending) == ["acc-d", "Company 1", "company 2", "Company 10", "zz-no-name"]
    descending = client.get(url(acme.workspace, "accounts/"), {"sort": "name", "order": "desc"})
    assert shown(descending) == list(reversed(shown(ascending)))


def test_segments_are_listed_by_name_in_natural_order(acme, vera):
    for name in ("Tier 10", "tier 2", "Tier 1"):
        Segment.objects.create(workspace=acme.workspace, name=name, conditions=[])
    listing = signed_in(vera).get(url(acme.workspace, "segments/"))
    own = [s.name for s in listing.context["segments"] if not s.builtin]
    assert own == ["Tier 1", "tier 2", "Tier 10"]


def test_the_name_key_follows_every_write_of_the_name(acme):
    apply(acme, identify("dee", {"email": "dee@x.example"}), group("dee", "acme-7"))
    dee = User.objects.get(product=acme.product, tracking_id="dee")
    account = Account.objects.get(product=acme.product, tracking_id="acme-7")
    assert (dee.name_key, account.name_key) == ("dee@x.example", "acme-000000000007")

    apply(
        acme,
        identify("dee", {"name": "Dee 3"}, days_ago=1),
        group("dee", "acme-7", {"name": "B"}, days_ago=1),
    )
    dee.refresh_from_db()
    account.refresh_from_db()
    assert (dee.name_key, account.name_key) == ("dee 000000000003", "b")

    # The marketplace's license names an account that has no name yet.
    account_prefixed_traits_replace(
        product_id=acme.product.id,
        traits_by_tracking_id={"cloud-1": {"am.status": "active"}},
        fallback_names={"cloud-1": "Licensee 12"},
    )
    assert Account.objects.get(tracking_id="cloud-1").name_key == "licensee 000000000012"

    # An edit through the ORM (the admin) writes it too.
    account.traits = {"name": "Zeta"}
    account.save(update_fields=["traits"])
    account.refresh_from_db()
    assert account.name_key == "zeta"


def test_the_migration_fills_the_keys_of_existing_rows(acme):
    apply(acme, identify("eve", {"firstName": "Eve", "lastName": "Ng"}), group("eve", "org-5"))
    User.objects.update(name_key="")
    Account.objects.update(name_key="")
    migration = importlib.import_module("engagement.migrations.0029_name_keys")
    # The models as the migration sees them (its historical state), as `migrate` runs it.
    state = MigrationLoader(connection).project_state(("engagement", "0029_name_keys"))
    migration.fill_name_keys(state.apps, None)
    assert User.objects.get(tracking_id="eve").name_key == "eve ng"
    assert Account.objects.get(tracking_id="org-5").name_key == "org-000000000005"


# --- Members and users by name, conditions in words --------------------------------------------


def test_condition_text_says_each_condition_in_words():
    assert condition_text({"field": "trait:plan", "operator": "equals", "value": "pro"}) == (
        "plan equals pro"
    )
    assert condition_text(
        {"field": "metric:engagement_score", "operator": "greater_than", "value": 74}
    ) == ("score greater than 74")
    assert condition_text(
        {
            "field": "event:Report_Created",
            "operator": "count_at_least",
            "value": 3,
            "within_last_days": 7,
        }
    ) == ("Report_Created at least 3 times in the last 7 days")
    assert condition_text({"field": "event:Login", "operator": "count_at_least", "value": 1}) == (
        "Login at least 1 time ever"
    )
    assert condition_text(
        {"field": "metric:last_seen", "operator": "within_last_days", "value": 30}
    ) == ("last seen within the last 30 days")
    assert condition_text({"field": "trait:email", "operator": "is_not_set"}) == (
        "email is not set"
    )
    assert condition_text({"field": "trait:beta", "operator": "not_equals", "value": True}) == (
        "beta does not equal true"
    )
    assert condition_text({"nonsense": 1}) == '{"nonsense": 1}'


def test_the_segment_page_names_members_and_says_conditions_in_words(acme, vera, scored):
    scored.enterprise.conditions = [
        {"field": "trait:plan", "operator": "equals", "value": "enterprise"},
        {"field": "metric:engagement_score", "operator": "greater_than", "value": 10},
    ]
    scored.enterprise.save()
    segment_refresh(segment=scored.enterprise)
    response = signed_in(vera).get(url(acme.workspace, f"segments/{scored.enterprise.id}/"))
    assert response.status_code == 200
    assert response.context["conditions"] == ["plan equals enterprise", "score greater than 10"]
    assert b"<li>plan equals enterprise</li>" in response.content
    link = f'href="/w/{acme.workspace.id}/accounts/{scored.initech.id}/">Initech</a>'
    assert link.encode() in response.content
    assert b'<span class="muted small">initech</span>' in response.content


def test_a_users_segment_lists_its_members_by_name(acme, vera):
    apply(
        acme,
        identify("gil", {"name": "Gil 2"}),
        identify("hal", {"email": "hal@x.example"}),
        track("gil", "Login"),
        track("hal", "Login"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    logins = Segment.objects.create(
        workspace=acme.workspace,
        name="Logged in",
        target=Segment.Target.USERS,
        conditions=[{"field": "event:Login", "operator": "count_at_least", "value": 1}],
    )
    segment_refresh(segment=logins)
    response = signed_in(vera).get(url(acme.workspace, f"segments/{logins.id}/"))
    labels = sorted((m.label, m.tracking_id) for m in response.context["members"].items)
    assert labels == [("Gil 2", "gil"), ("hal@x.example", "hal")]
    assert b"<li>Login at least 1 time ever</li>" in response.content


def test_an_accounts_users_show_by_name_with_the_id_beside(acme, vera, scored):
    response = signed_in(vera).get(url(acme.workspace, f"accounts/{scored.initech.id}/"))
    assert b'>Ann Lee</a> <span class="muted small">ann</span>' in response.content


# --- Favicon ----------------------------------------------------------------------------------


def test_every_page_links_the_favicon_and_favicon_ico_answers(acme, vera):
    page = signed_in(vera).get(url(acme.workspace, "users/"))
    assert b'rel="icon" href="/static/dashboard/favicon.svg"' in page.content
    response = Client().get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"] == "/static/dashboard/favicon.svg"
    assert finders.find("dashboard/favicon.svg") is not None


@pytest.mark.parametrize("path", ["accounts/", "users/"])
def test_a_first_click_on_name_sorts_a_to_z_and_on_a_figure_highest_first(acme, vera, path):
    client = signed_in(vera)

    first = client.get(url(acme.workspace, path)).context["sort_links"]
    again = client.get(url(acme.workspace, path), {"sort": "name", "order": "asc"})

    assert "sort=name" in first["name"] and "order=asc" in first["name"]
    assert "order=desc" in first["change"]  # score is the sort already: its link reverses it
    assert "order=asc" in first["score"]
    assert "order=desc" in again.context["sort_links"]["name"]


def test_a_users_page_leads_back_to_the_users_list(acme, vera, scored):
    user = User.objects.get(product=acme.product, tracking_id="ann")

    page = signed_in(vera).get(url(acme.workspace, f"users/{user.id}/")).content.decode()

    assert f'<a href="/w/{acme.workspace.id}/users/">Users</a> /' in page
