"""Named actors shared by every test: Acme (a product with a key and a token) and Globex."""

import contextlib
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
import pytest
from django.db import connection

from config.celery import app as celery_app
from engagement import event_store
from engagement.erasure_hooks import ErasureStage, erasure_hook_register, erasure_hook_unregister
from engagement.models import Product, Workspace
from engagement.services import product_create
from ingestion.models import IngestionKey
from ingestion.services.drain import accepted_requests_drain
from ingestion.services.keys import ingestion_key_create
from readapi.services import api_token_create
from tests.doorclient import DoorAPIClient, DoorClient


@dataclass
class Tenant:
    product: Product
    workspace: Workspace
    key: IngestionKey
    token: str

    @property
    def basic(self) -> str:
        return f"Basic {self.key.key}"

    @property
    def bearer(self) -> str:
        return f"Bearer {self.token}"


def make_tenant(name: str) -> Tenant:
    product, workspace = product_create(name=name)
    key = ingestion_key_create(product_id=product.id, label=f"{name} key")
    _, token = api_token_create(product_id=product.id, name=f"{name} token")
    return Tenant(product=product, workspace=workspace, key=key, token=token)


@pytest.fixture
def acme(db) -> Tenant:
    return make_tenant("Acme")


@pytest.fixture
def globex(db) -> Tenant:
    return make_tenant("Globex")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    request: pytest.FixtureRequest,
    django_db_modify_db_settings_parallel_suffix: None,
) -> None:
    """pytest-django's hook just before the test databases are made: on PostgreSQL, end the
    sessions an earlier run left on this process's test database, which would stop its DROP
    ("being accessed by other users") and with it every test of the process. PgBouncer, which
    `.ci/run` starts for the pooler tests, keeps its server connections for 10 minutes after
    their last use: a second run within them failed so at its first test. Not when the database
    is kept (`--reuse-db`)."""
    from django.conf import settings

    if request.config.getoption("reuse_db") and not request.config.getoption("create_db"):
        return
    for database in settings.DATABASES.values():
        if database["ENGINE"] != "django.db.backends.postgresql":
            continue
        test_name = database.get("TEST", {}).get("NAME") or f"test_{database['NAME']}"
        server = {
            "host": database.get("HOST"),
            "port": database.get("PORT"),
            "user": database.get("USER"),
            "password": database.get("PASSWORD"),
        }
        # Where the role may not end other sessions, the DROP says why as before.
        with (
            contextlib.suppress(psycopg.Error),
            psycopg.connect(
                dbname="postgres", autocommit=True, **{k: v for k, v in server.items() if v}
            ) as maintenance,
        ):
            maintenance.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                [test_name],
            )


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing() -> Iterator[None]:
    """Django's documented advice for tests: a fast password hasher. The production one (PBKDF2,
    a million iterations) spends 0.2-0.4 s of CPU on every password set or checked, and a few
    hundred tests create or sign in a user. Processes a test starts (servers, workers, commands)
    keep the production hasher."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(scope="session", autouse=True)
def _live_server_without_nagle() -> Iterator[None]:
    """Django's live server (pytest-django's `live_server`, the pages the browser tests load)
    sends a response's headers and its body apart; with Nagle's algorithm on, the body waits for
    the client's delayed ACK of the headers, 40 ms on Linux: 44 ms a request, where the service's
    own server (uvicorn on uvloop) answers in under a millisecond. socketserver turns Nagle off
    per connection when its handler asks."""
    from django.test.testcases import QuietWSGIRequestHandler

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(QuietWSGIRequestHandler, "disable_nagle_algorithm", True)
        yield


@pytest.fixture(autouse=True)
def _known_event_names_restored():
    """The process's cache of event names already stored (engagement.event_store) as each test
    found it: a test that runs the on-commit callbacks of work its transaction then rolls back
    (django_capture_on_commit_callbacks(execute=True)) would leave names there whose rows are
    gone, and on SQLite, which hands a rolled-back id out again, a later test's product would
    then skip storing them."""
    known = set(event_store._known_event_names)
    yield
    event_store._known_event_names.clear()
    event_store._known_event_names.update(known)


@pytest.fixture
def eager_tasks():
    """Queued tasks run at once, in the test's process, as a worker would pick them up."""
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


@pytest.fixture
def erasure_hook():
    """Add an erasure hook for one test (a seam outside the database), at BEFORE_TARGET unless
    told otherwise; it is removed afterwards."""
    added = []

    def add(function, stage: ErasureStage = ErasureStage.BEFORE_TARGET) -> None:
        erasure_hook_register(function, stage=stage)
        added.append(function)

    yield add
    for function in added:
        erasure_hook_unregister(function)


@pytest.fixture
def api_client() -> DoorAPIClient:
    """DRF's test client; a request to an ingestion path is answered by the ingestion door, in
    this process, storing inside the test's transaction (tests/doorclient.py)."""
    return DoorAPIClient()


@pytest.fixture
def client() -> DoorClient:
    """Django's test client, ingestion paths answered by the ingestion door (as `api_client`)."""
    return DoorClient()


@pytest.fixture(scope="session")
def _door_server(django_db_setup, django_db_blocker):
    from tests.ingestion.frontdoors import AsgiDoor

    door = AsgiDoor().start()
    yield door
    with django_db_blocker.unblock():
        door.stop()


@pytest.fixture
def live_door(transactional_db, _door_server):
    """The service as production serves it: uvicorn with the ingestion door (group commit) and
    Django behind it, in a thread of this process on the test database (`.url`). What it stores
    its own connection commits, so the test's database access is transactional (as with
    pytest-django's live_server)."""
    return _door_server


@pytest.fixture
def drain():
    """Apply everything accepted so far, as a worker would."""

    def run() -> int:
        total = 0
        while applied := accepted_requests_drain(limit=1000).requests:
            total += applied
        return total

    return run


@pytest.fixture
def post_json(api_client):
    def post(path: str, body, *, auth: str | None = None, **extra):
        if auth is not None:
            extra["HTTP_AUTHORIZATION"] = auth
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        return api_client.generic("POST", path, data, content_type="application/json", **extra)

    return post


@contextmanager
def database_down() -> Iterator[None]:
    """Point this process's connection (and its pool, if any) at a port where nothing listens:
    the real client meets a real refusal. Everything is put back on the way out."""

    def reset() -> None:
        connection.close()
        if getattr(connection, "pool", None) is not None:
            connection.close_pool()

    real_port = connection.settings_dict["PORT"]
    reset()
    connection.settings_dict["PORT"] = "1"
    try:
        yield
    finally:
        reset()
        connection.settings_dict["PORT"] = real_port


@contextmanager
def other_session():
    """A second, real session on the test database, as another worker would hold."""
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        user=settings["USER"] or "postgres",
        dbname=settings["NAME"],
    ) as session:
        yield session


@pytest.fixture
def shared_redis_cache(settings):
    """The production setup: a cache every process shares (CACHE_URL), in the suite's Redis,
    isolated by a prefix."""
    broker = settings.CELERY_BROKER_URL
    location = broker if broker.startswith("redis://") else "redis://127.0.0.1:6379/0"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": location,
            "KEY_PREFIX": f"test-{uuid.uuid4().hex}",
        }
    }
    settings.CACHE_SHARED = True
    # No cache.clear() here: on Redis it is FLUSHDB, and this Redis is also the broker. The
    # prefixed keys expire with their window.


@pytest.fixture
def broker():
    """The real broker (Redis) of the test run, emptied before and after: for tests that start
    worker processes."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` spreads the tests over the cores (pytest-xdist, `--dist loadgroup`), each
    worker with a database and a data directory of its own. Tests that start real servers and
    workers share one worker, since their Celery workers consume the one broker's queues (and
    some empty it), and they come first: the longest share starts at once, not at the end. It
    runs first: xdist's own hook reads the group markers into the node ids."""
    for item in items:
        if item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.xdist_group("processes"))
    items.sort(key=lambda item: item.get_closest_marker("e2e") is None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse a run whose tests cannot pass where they would run (below); and fail the run, not
    a test at random, if the grouping above stops reaching xdist's scheduler (it reads the group
    from a suffix xdist appends to each node id: pytest 9.2 ignores it,
    pytest-dev/pytest-xdist#1386)."""
    missing = services_missing(session.items)
    if missing:
        raise pytest.UsageError(missing)
    if not getattr(session.config.option, "loadgroup", False):
        return
    ungrouped = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("e2e") and not item.nodeid.endswith("@processes")
    ]
    if ungrouped:
        raise pytest.UsageError(
            f"--dist loadgroup is not grouping the e2e tests (e.g. {ungrouped[0]}): "
            "check the pytest and pytest-xdist versions"
        )


def services_missing(items: list[pytest.Item]) -> str:
    """Why the selected tests cannot run here, or "". Plain `pytest` runs on the embedded
    defaults (SQLite, the file broker): tests marked `postgresql` fail there on SQL that SQLite
    lacks, and the `e2e` ones (real servers and workers) are run only against PostgreSQL and a
    real broker, the services `make test` points them at; without one they error or time out."""
    from django.conf import settings

    def selected(*markers: str) -> list[str]:
        return [
            item.nodeid
            for item in items
            if any(item.get_closest_marker(marker) for marker in markers)
        ]

    missing = []
    if connection.vendor != "postgresql":
        missing.append("PostgreSQL (DATABASE_URL is not set: the run would use SQLite)")
        needing = selected("postgresql", "e2e")
    else:
        needing = []
    broker = settings.CELERY_BROKER_URL
    if broker.split(":", 1)[0] not in ("redis", "amqp", "pyamqp"):
        needing_broker = selected("e2e")
        if needing_broker:
            missing.append(f"a real broker (CELERY_BROKER_URL is {broker!r})")
            needing = needing or needing_broker
    if not needing:
        return ""
    return (
        f"{len(needing)} selected tests (e.g. {needing[0]}) need "
        f"{' and '.join(missing)}. `make test` sets both; for a few tests: "
        "DATABASE_URL=postgres://postgres@127.0.0.1:5432/eds "
        "CELERY_BROKER_URL=redis://127.0.0.1:6379/0 .venv/bin/pytest <paths>; "
        "or leave them out: -m 'not postgresql and not e2e'."
    )


@pytest.fixture(autouse=True)
def _no_session_state():
    """Fail a test whose service code left PostgreSQL session state behind its transaction
    (SET, a temporary table without ON COMMIT DROP, a held cursor...): behind a transaction
    pooler the next transaction may run on another server session (tests/session_state.py)."""
    from tests.session_state import guard, install

    install()
    guard.taken()
    yield
    found = guard.taken()
    if found:
        pytest.fail("session state that outlives a transaction:\n  " + "\n  ".join(found[:10]))
