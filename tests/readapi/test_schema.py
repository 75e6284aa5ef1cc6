"""The OpenAPI schema is generated from the code, valid, warning-free and served."""

import re

from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import Client


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


def _docs_asset_urls(content: bytes) -> list[str]:
    return re.findall(r"""(?:src|href)=["']([^"']+)["']""", content.decode())


def test_docs_page_references_only_local_static_files(client, db):
    """/api/docs/ works offline: Swagger UI comes from the pinned sidecar package, never a CDN."""
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    text = docs.content.decode()
    # No address of another host anywhere in the page. (Not "cdn" anywhere: the page carries
    # random tokens, and one once held those three letters.)
    assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.IGNORECASE), text
    urls = _docs_asset_urls(docs.content)
    assert not [url for url in urls if "cdn" in url.lower()]
    assert any(url.endswith("swagger-ui-bundle.js") for url in urls)
    assert any(url.endswith("swagger-ui.css") for url in urls)
    for url in urls:
        assert url.startswith(settings.STATIC_URL if settings.STATIC_URL.startswith("/") else "/")
        assert "drf_spectacular_sidecar" in url


def test_docs_static_files_are_served(client, db, settings):
    """Every asset the docs page names is found by the staticfiles finders (so collectstatic
    ships it) and served by the service itself (WhiteNoise)."""
    settings.WHITENOISE_USE_FINDERS = True  # read by the middleware when a client first loads it
    settings.WHITENOISE_AUTOREFRESH = True
    urls = _docs_asset_urls(client.get("/api/docs/").content)
    assert urls
    served = Client()
    for url in urls:
        relative = url.split("/static/", 1)[1]
        assert finders.find(relative), relative
        response = served.get(url)
        assert response.status_code == 200, url
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert len(body) > 100, url


def test_ingestion_paths_have_no_trailing_slash_bodies_keys_and_statuses(client, db):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    paths = schema["paths"]
    assert not [path for path in paths if path.endswith("/")]
    schemes = schema["components"]["securitySchemes"]
    assert schemes["ingestionKey"] == {**schemes["ingestionKey"], "type": "http", "scheme": "basic"}
    assert schemes["apiToken"]["scheme"] == "bearer"
    for name in ("v2/identify", "v2/group", "v2/track", "v1/users", "v1/groups", "v1/events"):
        operation = paths[f"/{name}"]["post"]
        body = operation["requestBody"]
        assert body["required"] is True
        properties = body["content"]["application/json"]["schema"]["properties"]
        assert set(operation["responses"]) == {"202", "400", "413", "414", "415", "431", "503"}
        if name.startswith("v2/"):
            assert "userId" in properties and "groupId" in properties
            assert operation["security"] == [{"ingestionKey": []}]
        else:
            assert "user_id" in properties and "group_id" in properties
            assert "api_key" in properties
            assert operation.get("security", []) == []
    track = paths["/v2/track"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert set(track["required"]) == {"userId", "event"}
    segment = paths["/segment"]["post"]
    assert set(segment["responses"]) == {"202", "400", "401", "413", "414", "415", "431", "503"}
    assert {"ingestionKey": []} in segment["security"]
    batch = paths["/v1/batch"]["post"]
    batch_body = batch["requestBody"]["content"]["application/json"]["schema"]
    assert {"batch", "sentAt"} <= set(batch_body["properties"])
    assert batch_body["required"] == ["batch"]
    assert set(batch["responses"]) == {"200", "400", "401", "413", "414", "415", "431", "503"}


def test_read_api_statuses_expand_and_optional_stats(client, db):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for path, operations in schema["paths"].items():
        if path.startswith(("/v2/workspaces", "/v2/accounts", "/v2/users", "/v2/segments")) or (
            path == "/v1/accounts"
        ):
            operation = operations["get"]
            assert set(operation["responses"]) == {"200", "400", "401", "404", "429"}, path
            assert operation["security"] == [{"apiToken": []}]
    assert "stats" in schema["components"]["schemas"]["Workspace"]["properties"]
    assert "stats" not in schema["components"]["schemas"]["Workspace"]["required"]
    parameters = schema["paths"]["/v2/workspaces/{workspace_id}"]["get"]["parameters"]
    expand = next(p for p in parameters if p["name"] == "expand")
    assert expand["schema"]["items"]["enum"] == ["stats"]
    assert expand["explode"] is False
    parameters = schema["paths"]["/v2/accounts"]["get"]["parameters"]
    expand = next(p for p in parameters if p["name"] == "expand")
    assert expand["schema"]["items"]["enum"] == ["traits", "segments"]


def test_record_schemas_say_the_served_types_and_nulls(client, db):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    schemas = schema["components"]["schemas"]
    for name in ("Account", "User"):
        properties, required = schemas[name]["properties"], schemas[name]["required"]
        for field in ("raw_score", "previous_raw_score"):
            assert properties[field]["type"] == "integer", (name, field)
            assert field in required
        for field in ("percentile_rank", "adoption"):
            assert properties[field]["type"] == "number", (name, field)
        for field in ("last_seen", "scored_at"):
            assert properties[field] == {
                **properties[field],
                "format": "date-time",
                "nullable": True,
            }
    assert schemas["User"]["properties"]["email"]["nullable"] is True
    assert schemas["Account"]["properties"]["active_user_share"]["nullable"] is True
    assert schemas["BreakdownItem"]["properties"]["points"]["type"] == "integer"
