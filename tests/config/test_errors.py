"""Error answers: API paths in the one error body; every other path a page in the dashboard's
look, with its navigation and a way back (with DEBUG off, as served)."""

import pytest
from django.test import Client

from config.errors import is_api_path
from tests.conftest import database_down, make_tenant

STYLESHEET = "/static/dashboard/dashboard.css"


def test_an_unknown_api_path_is_a_json_404(client, db, settings):
    settings.DEBUG = False
    response = client.post("/v2/trak", {}, content_type="application/json")

    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "message": "There is no endpoint at /v2/trak."}


def styled(response, status: int) -> str:
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert STYLESHEET in html
    assert '<header class="top">' in html
    assert f"Error {status}" in html
    return html


def test_an_unknown_page_is_the_styled_404_with_a_way_to_sign_in(client, db, settings):
    settings.DEBUG = False
    html = styled(client.get("/nothing-here/"), 404)

    assert "Page not found" in html
    assert "There is no page at /nothing-here/." in html
    assert 'href="/login/">Sign in</a>' in html


def test_an_anonymous_visitor_to_a_workspace_page_is_sent_to_sign_in(client, acme, settings):
    settings.DEBUG = False
    response = client.get(f"/w/{acme.workspace.id}/accounts/999/")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_a_refused_admin_page_is_the_styled_403_with_a_way_back(admin_client, settings):
    settings.DEBUG = False
    html = styled(admin_client.get("/admin/engagement/account/add/"), 403)

    assert "Not allowed" in html
    assert 'href="/admin/">The admin&#x27;s home</a>' in html


@pytest.fixture
def failing(settings):
    settings.DEBUG = False
    settings.ROOT_URLCONF = "tests.config.failing_urls"


@pytest.mark.django_db(transaction=True)
def test_the_500_page_is_styled_and_needs_neither_database_nor_session(failing, django_user_model):
    person = django_user_model.objects.create_user("vera", password="a-Long-passw0rd!x")
    client = Client(raise_request_exception=False)
    client.force_login(person)
    with database_down():
        response = client.get("/failing/")

    html = styled(response, 500)
    assert "Something went wrong" in html
    assert 'href="/">The dashboard' in html


def test_an_api_path_keeps_its_json_500(failing, db):
    response = Client(raise_request_exception=False).get("/v2/failing")

    assert response.status_code == 500
    assert response.json() == {
        "code": "server_error",
        "message": "Something went wrong on our side; retry later.",
    }


def test_an_api_path_keeps_its_json_403_and_404(db, settings):
    settings.DEBUG = False
    tenant = make_tenant("Initech")
    response = Client().get("/v2/nothing-here", HTTP_AUTHORIZATION=tenant.bearer)

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_a_host_the_service_does_not_serve_is_a_json_400_on_api_paths(client, db, settings):
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["eds.example"]
    response = client.get("/v2/workspaces", HTTP_HOST="evil.example")

    assert response.status_code == 400
    assert response.json() == {
        "code": "bad_request",
        "message": "The Host header names a host this service does not serve.",
    }


def test_a_refused_host_on_a_page_keeps_the_html_400(client, db, settings):
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["eds.example"]
    response = client.get("/admin/login/", HTTP_HOST="evil.example")

    html = styled(response, 400)
    assert "The Host header names a host this service does not serve." in html


# A leading `//` cannot go through the test client (it reads `//v2` as a host):
# tests/ingestion/test_door_http.py sends those to the door under uvicorn.
@pytest.mark.parametrize("path", ["/V2/TRACK", "/v2//track", "/Segment", "/API//x", "/v1//batch"])
def test_an_api_path_with_doubled_slashes_or_capitals_is_a_json_404(client, db, settings, path):
    settings.DEBUG = False
    response = client.post(path, {}, content_type="application/json")

    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "message": f"There is no endpoint at {path}."}


@pytest.mark.parametrize("path", ["/nowhere", "/v3/track", "/segments", "//w/1/accounts/x"])
def test_a_path_outside_the_api_keeps_the_html_404(client, db, settings, path):
    settings.DEBUG = False
    response = client.get(path)

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize(
    ("path", "api"),
    [
        ("//v2/workspaces", True),
        ("///V1/batch", True),
        ("/v2", True),
        ("//segment", True),
        ("/segments", False),
        ("/v3/track", False),
        ("//admin/v2/", False),
        ("/", False),
    ],
)
def test_what_counts_as_an_api_path(path, api):
    assert is_api_path(path) is api
