"""One error type and one body for every API, and one 503 with Retry-After (config/api_errors.py):
the ingestion acceptance rules, the read API and the service's own handlers answer alike."""

import pytest
from django.utils import timezone

from config.api_errors import ApiError, service_unavailable
from ingestion import acceptance, store
from tests.conftest import database_down, make_tenant


def test_the_acceptance_rules_raise_the_one_error_type_with_the_one_body():
    with pytest.raises(ApiError) as raised:
        acceptance.parse_json_object(b"[1, 2]")

    error = raised.value
    assert acceptance.RequestError is ApiError
    assert (error.status, error.retry_after) == (400, None)
    assert error.body() == {
        "code": "invalid_body",
        "message": "The request body must be a JSON object.",
    }


def test_an_error_with_fields_names_them_in_the_body():
    error = ApiError(400, "invalid_fields", "Some fields are not valid.", {"userId": ["Required."]})

    assert error.body() == {
        "code": "invalid_fields",
        "message": "Some fields are not valid.",
        "fields": {"userId": ["Required."]},
    }


def test_the_read_api_answers_its_errors_in_the_one_body(api_client, acme):
    response = api_client.get("/v2/workspaces/999999", HTTP_AUTHORIZATION=acme.bearer)

    assert response.status_code == 404
    assert response.json() == ApiError(404, "not_found", "Workspace 999999 was not found.").body()


@pytest.mark.postgresql  # the database is made unreachable by its port
@pytest.mark.django_db(transaction=True)
def test_every_503_carries_the_one_retry_after(api_client, client, settings):
    """The read API, /healthz and the ingestion store (which both doors render) answer a
    dependency down with the same 503: status, Retry-After from INGESTION_RETRY_AFTER_SECONDS."""
    settings.INGESTION_RETRY_AFTER_SECONDS = 17
    acme = make_tenant("Acme")
    store._backlog_cache["checked_at"] = float("-inf")  # count the backlog: the database is read
    with database_down():
        read = api_client.get("/v2/workspaces", HTTP_AUTHORIZATION=acme.bearer)
        health = client.get("/healthz")
        with pytest.raises(ApiError) as raised:
            store.store_accepted_batch([(timezone.now(), None)])
    store._backlog_cache["checked_at"] = float("-inf")

    assert (read.status_code, read["Retry-After"]) == (503, "17")
    assert read.json() == service_unavailable().body()
    assert (health.status_code, health["Retry-After"]) == (503, "17")
    assert health.json()["status"] == "unavailable"
    ingest = raised.value
    assert (ingest.status, ingest.code, ingest.retry_after) == (503, "service_unavailable", 17)
