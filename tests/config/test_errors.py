"""Unknown API paths answer in the one error body, not an HTML page."""


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
