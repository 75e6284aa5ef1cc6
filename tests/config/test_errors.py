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
