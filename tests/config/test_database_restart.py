"""A database restart, as the service's processes see it: every one of their PostgreSQL sessions
ends at once. The web server (uvicorn, as production starts it) and a Celery worker go on
without being restarted themselves: each request answers its usual status, or 503 with
Retry-After while the database is away, never 500.

The sessions are ended for real with pg_terminate_backend, on this test's own database only (the
server is shared: other databases, and the server itself, are never touched)."""

import json
import os
import signal
import urllib.error
import urllib.request

import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.test import Client, override_settings

from engagement.models import Event, ProductMembership
from tests.config.test_errors import styled
from tests.conftest import database_down, make_tenant, other_session
from tests.processes import free_port, http, production_env, spawn, wait_for, web_command

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


def _end_every_other_session() -> int:
    """What a restart does to the service's connections: end every session on this test's
    database but the test's own. Returns how many were ended."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def _session_cookie(person, secret_key: str) -> str:
    """The cookie of a signed-in session, stored as the server's login view stores one (signed
    with the server's secret key)."""
    with override_settings(SECRET_KEY=secret_key):
        session = SessionStore()
        session[SESSION_KEY] = str(person.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = person.get_session_auth_hash()
        session.create()
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"


@pytest.mark.e2e
def test_the_web_server_and_a_worker_survive_a_database_restart(broker, tmp_path):
    acme = make_tenant("Acme")
    manager = get_user_model().objects.create_user("mona", "mona@example.com", "x" * 20)
    ProductMembership.objects.create(
        user=manager, product=acme.product, role=ProductMembership.Role.MANAGER
    )
    # Direct: the test ends the service's own server sessions, which a pooler would hold.
    env = production_env(settings.CELERY_BROKER_URL, tmp_path, direct=True)
    signed_in = {"Cookie": _session_cookie(manager, env["SECRET_KEY"])}
    workspace = acme.workspace.id
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # One worker process, so every request below meets the connections the first ones left.
    web = spawn(
        web_command(port, workers=1),
        env,
    )
    worker = spawn(
        ["celery", "-A", "config", "worker", "--concurrency", "1", "--loglevel", "WARNING"], env
    )
    requests = {
        "a dashboard page": ("GET", f"/w/{workspace}/", None, signed_in, 200),
        "a missing page": ("GET", f"/w/{workspace}/accounts/999999/", None, signed_in, 404),
        "an address no page has": ("GET", "/no-such-page/", None, signed_in, 404),
        "another product's workspace": ("GET", "/w/999999/", None, signed_in, 404),
        "the read API": (
            "GET",
            f"/v2/accounts?workspace_id={workspace}",
            None,
            {"Authorization": acme.bearer},
            200,
        ),
        "the ingestion door": (
            "POST",
            "/v2/track",
            {"userId": "ann", "event": "Report_Created"},
            {"Authorization": acme.basic, "Content-Type": "application/json"},
            202,
        ),
        "the health check": ("GET", "/healthz", None, {}, 200),
    }

    expected = {name: (request[-1], None) for name, request in requests.items()}

    def answers() -> dict[str, tuple[int, str | None]]:
        found = {}
        for name, (method, path, body, headers, _) in requests.items():
            status, _, retry_after = http_with_headers(method, f"{base}{path}", body, headers)
            found[name] = (status, retry_after)
        return found

    try:
        wait_for(lambda: http("GET", f"{base}/healthz")[0] == 200)
        # Every kind of request, several times (Django answers a 404 on one of a pool of
        # threads), so the server and the worker hold connections of every kind.
        before = [answers() for _ in range(8)]
        assert all(found == expected for found in before), before
        wait_for(lambda: Event.objects.filter(product=acme.product).count() == 8)

        assert _end_every_other_session() > 0
        after = [answers() for _ in range(8)]
        # The worker, too, goes on storing what the door accepted.
        accepted = sum(found["the ingestion door"][0] == 202 for found in after)
        wait_for(lambda: Event.objects.filter(product=acme.product).count() == 8 + accepted)
    finally:
        for process in (worker, web):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=30)

    # Right after the restart a request may find the database away: a 503 that says when to
    # retry is a fair answer then; anything else is the request's usual status.
    for name, (status, retry_after) in after[0].items():
        if status == 503:
            assert retry_after is not None, name
        else:
            assert (status, retry_after) == expected[name], name
    assert after[1:] == [expected] * 7


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs) -> None:
        return None  # a redirect (to the sign-in page) is an answer of its own


_opener = urllib.request.build_opener(_NoRedirects)


def http_with_headers(method: str, url: str, body: dict | None, headers: dict):
    """`http`, without following redirects, with the answer's Retry-After."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with _opener.open(request, timeout=10) as response:
            return response.status, response.read(), response.headers.get("Retry-After")
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers.get("Retry-After")


@pytest.fixture
def signed_in_manager(django_user_model, settings) -> tuple[Client, int]:
    settings.DEBUG = False
    acme = make_tenant("Acme")
    person = django_user_model.objects.create_user("mona", password="x" * 20)
    ProductMembership.objects.create(
        user=person, product=acme.product, role=ProductMembership.Role.MANAGER
    )
    client = Client(raise_request_exception=False)
    client.force_login(person)
    return client, acme.workspace.id


@pytest.mark.parametrize("path", ["/w/{}/", "/w/{}/accounts/999999/", "/no-such-page/"])
def test_a_page_answers_503_with_retry_after_while_the_database_is_away(
    signed_in_manager, settings, path
):
    client, workspace = signed_in_manager
    with database_down():
        response = client.get(path.format(workspace))

    html = styled(response, 503)
    assert response["Retry-After"] == str(settings.INGESTION_RETRY_AFTER_SECONDS)
    assert "Unavailable for a moment" in html
    assert 'href="/">The dashboard' in html


def test_the_404_page_replaces_a_connection_the_database_dropped(signed_in_manager):
    client, workspace = signed_in_manager
    assert client.get(f"/w/{workspace}/").status_code == 200  # a connection is open now
    with other_session() as session:  # what a restart does to it
        session.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])

    html = styled(client.get("/no-such-page/"), 404)

    assert "mona" in html  # signed in: the session was read on a new connection
