"""GET /healthz reports the database and the broker as ok or down (never the error's text), and
answers 503 with Retry-After when either is down."""

import pytest

from config.celery import app as celery_app
from tests.conftest import database_down


def test_healthy_service_answers_200(client, db):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok"}
    assert not response.has_header("Retry-After")


def test_an_unreachable_broker_answers_503(client, db, settings):
    real_url = celery_app.conf.broker_write_url
    celery_app.conf.broker_write_url = "redis://127.0.0.1:1/0"  # nothing listens there
    try:
        response = client.get("/healthz")
    finally:
        celery_app.conf.broker_write_url = real_url

    assert response.status_code == 503
    assert response["Retry-After"] == str(settings.INGESTION_RETRY_AFTER_SECONDS)
    assert response.json() == {"status": "unavailable", "database": "ok", "broker": "down"}


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_database_answers_503(client, settings):
    with database_down():
        response = client.get("/healthz")

    assert response.status_code == 503
    assert response["Retry-After"] == str(settings.INGESTION_RETRY_AFTER_SECONDS)
    assert response.json() == {"status": "unavailable", "database": "down", "broker": "ok"}
    # No host, port or driver message for whoever can reach the endpoint.
    assert b"Error" not in response.content and b"127.0.0.1" not in response.content
