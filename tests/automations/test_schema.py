"""Every webhook event type is in the OpenAPI schema, with an example of its own type."""


def test_the_schema_documents_every_webhook_type_with_an_example(client, db):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    hooks = schema["x-webhooks"]
    expected = {
        f"{kind}.{event}"
        for kind in ("account", "user")
        for event in (
            "score_changed",
            "band_entered",
            "segment_entered",
            "segment_left",
            "created",
            "inactive",
            "digest",
        )
    } | {"automation.test"}
    assert set(hooks) == expected
    for name, hook in hooks.items():
        body = hook["post"]["requestBody"]["content"]["application/json"]
        assert body["example"]["type"] == name
        assert "webhook-signature" in hook["post"]["description"]
        # A receiver learns that retries stop once the automation is switched off.
        assert "switched off" in hook["post"]["description"]
    assert "WebhookEvent" in schema["components"]["schemas"]
    digest = hooks["account.digest"]["post"]["requestBody"]["content"]["application/json"]
    assert digest["schema"] == {"$ref": "#/components/schemas/WebhookDigest"}
    assert {"count", "subjects_url"} <= set(digest["example"]["data"])
