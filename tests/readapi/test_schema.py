"""The OpenAPI schema is generated from the code, valid, warning-free and served."""

from django.core.management import call_command


def test_schema_generates_without_warnings(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    text = target.read_text()
    for path in (
        "/v2/workspaces",
        "/v2/accounts/{account_id}",
        "/v2/users",
        "/v2/segments/{segment_id}/members",
        "/v1/accounts",
    ):
        assert f"  {path}:" in text
    assert "scheme: bearer" in text


def test_schema_and_docs_are_served(client, db):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/v2/accounts" in schema.json()["paths"]

    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger" in docs.content.lower()
