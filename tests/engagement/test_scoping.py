"""One product-scoped base view (engagement.scoping) for the read API and the dashboard: the
same `scoped_*` methods, so another product's id answers 404 in both by one rule; and one base of
workspace pages for the dashboard and the automations."""

import pytest
from django.test import Client

from automations import views as automation_views
from dashboard import views as dashboard_views
from engagement.models import Account, ProductMembership
from engagement.scoping import ProductScopedView, WorkspaceView
from readapi.views import ReadApiView
from tests.dashboard.conftest import PASSWORD, signed_in

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

SCOPED = ("scoped_workspace", "scoped_account", "scoped_user", "scoped_segment")


def test_the_read_api_and_the_dashboard_scope_records_through_one_base():
    for view in (ReadApiView, dashboard_views.WorkspaceView):
        assert issubclass(view, ProductScopedView)
        for name in SCOPED:
            assert getattr(view, name) is getattr(ProductScopedView, name), (view, name)


def test_another_products_account_is_404_in_both(
    acme, globex, api_client, django_user_model, settings
):
    settings.DEBUG = False
    theirs = Account.objects.create(product=globex.product, tracking_id="globo")
    person = django_user_model.objects.create_user("ada", "ada@example.com", PASSWORD)
    ProductMembership.objects.create(user=person, product=acme.product)

    api = api_client.get(f"/v2/accounts/{theirs.id}", HTTP_AUTHORIZATION=acme.bearer)
    page = signed_in(person).get(f"/w/{acme.workspace.id}/accounts/{theirs.id}/")

    assert api.status_code == 404
    assert api.json() == {"code": "not_found", "message": f"Account {theirs.id} was not found."}
    assert page.status_code == 404
    assert b"No such account." in page.content


def test_the_dashboard_and_the_automations_pages_share_one_workspace_page_base():
    pages = [
        view
        for module in (dashboard_views, automation_views)
        for view in vars(module).values()
        if isinstance(view, type) and issubclass(view, WorkspaceView) and view is not WorkspaceView
    ]
    assert {view.__module__ for view in pages} == {"dashboard.views", "automations.views"}
    for view in pages:
        for name in ("dispatch", "find_workspace", "not_found"):
            assert getattr(view, name) is getattr(WorkspaceView, name), (view, name)


def test_automations_pages_answer_as_the_dashboards_do(acme, globex, django_user_model):
    person = django_user_model.objects.create_user("ada", "ada@example.com", PASSWORD)
    ProductMembership.objects.create(user=person, product=acme.product)
    for section in ("accounts/", "automations/"):
        anonymous = Client().get(f"/w/{acme.workspace.id}/{section}")
        theirs = signed_in(person).get(f"/w/{globex.workspace.id}/{section}")
        ours = signed_in(person).get(f"/w/{acme.workspace.id}/{section}")

        assert anonymous.status_code == 302, section
        assert anonymous["Location"].startswith("/login/?next="), section
        assert theirs.status_code == 404, section
        assert ours.status_code == 200, section
        assert ours.context["workspace"] == acme.workspace, section
        assert ours.context["role"] == ProductMembership.Role.VIEWER, section
