"""The read API with a dependency down: 503, Retry-After and the service's error body, not 500.

Each dependency is made unreachable for real (its settings point at a port where nothing
listens), not by mocking a driver."""

import pytest
from django.test import override_settings

from config.celery import app as celery_app
from tests.conftest import database_down, make_tenant

UNAVAILABLE = {"code": "service_unavailable", "message": "The service is unavailable; retry later."}
CACHE_DOWN = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
    }
}


def assert_unavailable(response, settings) -> None:
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == str(settings.INGESTION_RETRY_AFTER_SECONDS)
    assert response.json() == UNAVAILABLE


@pytest.mark.django_db(transaction=True)
def test_the_read_api_answers_503_when_the_database_is_down(api_client, settings):
    acme = make_tenant("Acme")
    with database_down():
        response = api_client.get(
            f"/v2/accounts?workspace_id={acme.workspace.id}", HTTP_AUTHORIZATION=acme.bearer
        )

    assert_unavailable(response, settings)


def test_the_read_api_answers_503_when_the_shared_cache_is_down(api_client, acme, settings):
    settings.READ_API_COUNTS_CACHE_SECONDS = 10  # the ranked list's total is cached
    with override_settings(CACHES=CACHE_DOWN):
        response = api_client.get(
            f"/v2/accounts?workspace_id={acme.workspace.id}", HTTP_AUTHORIZATION=acme.bearer
        )

    assert_unavailable(response, settings)


def test_the_read_api_does_not_need_the_broker(api_client, acme):
    real_url = celery_app.conf.broker_write_url
    celery_app.conf.broker_write_url = "redis://127.0.0.1:1/0"
    try:
        response = api_client.get(
            f"/v2/accounts?workspace_id={acme.workspace.id}", HTTP_AUTHORIZATION=acme.bearer
        )
    finally:
        celery_app.conf.broker_write_url = real_url

    assert response.status_code == 200
