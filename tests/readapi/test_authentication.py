"""Bearer tokens: who may read, what a refusal looks like, when a token was last used."""

from datetime import timedelta

from django.utils import timezone

from readapi.models import TOKEN_PREFIX, ApiToken, generate_token
from readapi.services import api_token_create, api_token_revoke


def assert_unauthorized(response, code: str) -> None:
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    body = response.json()
    assert body["code"] == code
    assert body["message"]
    assert set(body) == {"code", "message"}


def test_no_token_is_401_with_bearer_challenge(read):
    assert_unauthorized(read(None, "/v2/workspaces"), "not_authenticated")


def test_unknown_token_is_401(api_client, db):
    response = api_client.get("/v2/workspaces", HTTP_AUTHORIZATION="Bearer eds_" + "x" * 43)
    assert_unauthorized(response, "invalid_token")


def test_token_without_prefix_is_401(api_client, acme):
    response = api_client.get("/v2/workspaces", HTTP_AUTHORIZATION=f"Bearer {acme.token[4:]}")
    assert_unauthorized(response, "invalid_token")


def test_ingestion_key_as_basic_is_not_a_read_credential(api_client, acme):
    response = api_client.get("/v2/workspaces", HTTP_AUTHORIZATION=acme.basic)
    assert_unauthorized(response, "not_authenticated")


def test_revoked_token_is_401(read, acme):
    assert read(acme, "/v2/workspaces").status_code == 200
    token = ApiToken.objects.get(product=acme.product)
    api_token_revoke(token_id=token.id)
    assert_unauthorized(read(acme, "/v2/workspaces"), "invalid_token")


def test_scheme_is_case_insensitive(api_client, acme):
    response = api_client.get("/v2/workspaces", HTTP_AUTHORIZATION=f"bearer {acme.token}")
    assert response.status_code == 200


def test_last_used_at_is_recorded_at_most_once_a_minute(read, acme):
    token = ApiToken.objects.get(product=acme.product)
    assert token.last_used_at is None

    before = timezone.now()
    read(acme, "/v2/workspaces")
    token.refresh_from_db()
    first_use = token.last_used_at
    assert first_use is not None and first_use >= before

    read(acme, "/v2/workspaces")
    token.refresh_from_db()
    assert token.last_used_at == first_use  # within the minute: no second write

    ApiToken.objects.filter(id=token.id).update(last_used_at=first_use - timedelta(minutes=2))
    read(acme, "/v2/workspaces")
    token.refresh_from_db()
    assert token.last_used_at >= before


def test_each_token_of_a_product_reads_that_product(api_client, acme):
    _, second = api_token_create(product_id=acme.product.id, name="second")
    response = api_client.get("/v2/workspaces", HTTP_AUTHORIZATION=f"Bearer {second}")
    assert response.status_code == 200
    assert [w["id"] for w in response.json()["data"]] == [acme.workspace.id]


def test_new_api_tokens_never_begin_with_a_dash():
    """A token passed to a command as printed is never read as an option."""
    assert TOKEN_PREFIX[0].isalnum()
    assert all(generate_token().startswith(TOKEN_PREFIX) for _ in range(100))
