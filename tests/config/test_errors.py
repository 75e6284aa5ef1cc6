"""Unknown API paths answer in the one error body, not an HTML page."""

import pytest

from config.errors import is_api_path


def test_an_unknown_api_path_is_a_json_404(client, db, settings):
    settings.DEBUG = False
    response = client.post("/v2/trak", {}, content_type="application/json")

    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "message": "There is no endpoint at /v2/trak."}


def test_other_unknown_paths_keep_the_html_page(client, db, settings):
    settings.DEBUG = False
    response = client.get("/nowhere")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


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

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


# A leading `//` cannot go through the test client (it reads `//v2` as a host):
# test_doors_differential.py sends those to gunicorn and uvicorn.
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
