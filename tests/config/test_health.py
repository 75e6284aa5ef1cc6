"""GET /healthz reports the database and the broker, and answers 503 when either is down."""

import pytest

from config.celery import app as celery_app
from tests.conftest import database_down


def test_healthy_service_answers_200(client, db):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok"}


def test_an_unreachable_broker_answers_503(client, db):
    real_url = celery_app.conf.broker_write_url
    celery_app.conf.broker_write_url = "redis://127.0.0.1:1/0"  # nothing listens there
    try:
        response = client.get("/healthz")
    finally:
        celery_app.conf.broker_write_url = real_url

    assert response.status_code == 503
    body = response.json()
    assert (body["status"], body["database"]) == ("unavailable", "ok")
    assert body["broker"] != "ok"


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_database_answers_503(client):
    with database_down():
        response = client.get("/healthz")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["database"] != "ok"
