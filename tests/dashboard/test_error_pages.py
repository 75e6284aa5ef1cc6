"""A dashboard page that is not there: the styled 404 with the workspace's navigation when the
address names a workspace of the signed-in person, and a way home (DEBUG off, as served)."""

from tests.config.test_errors import styled
from tests.dashboard.conftest import signed_in


def test_a_signed_in_person_gets_the_404_with_a_way_home(vera, settings):
    settings.DEBUG = False
    html = styled(signed_in(vera).get("/nothing-here/"), 404)

    assert "vera" in html  # who is signed in, and the sign-out button
    assert "Sign out" in html
    assert 'href="/">The dashboard&#x27;s home</a>' in html


def test_a_missing_account_keeps_the_workspace_navigation(vera, acme, settings):
    settings.DEBUG = False
    workspace = acme.workspace.id
    html = styled(signed_in(vera).get(f"/w/{workspace}/accounts/999/"), 404)

    assert "No such account." in html
    for label, url in [
        ("Overview", f"/w/{workspace}/"),
        ("Accounts", f"/w/{workspace}/accounts/"),
        ("Segments", f"/w/{workspace}/segments/"),
        ("Ingestion health", f"/w/{workspace}/health/"),
    ]:
        assert f'<a href="{url}"' in html and f">{label}</a>" in html
    assert f'href="/w/{workspace}/">Acme / {acme.workspace.name} overview</a>' in html


def test_another_products_workspace_is_a_404_without_its_navigation(vera, globex, settings):
    settings.DEBUG = False
    html = styled(signed_in(vera).get(f"/w/{globex.workspace.id}/accounts/1/"), 404)

    assert "No such workspace." in html
    assert "Globex" not in html
