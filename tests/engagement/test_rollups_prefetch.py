"""A full rescore and a history build first ask PostgreSQL's pg_prewarm to read the rollups and
their indexes into the operating system's cache (engagement.backends.postgresql.rollups_prefetch),
where the extension is installed and they fit effective_cache_size; the migration creates the
extension where the database role may and skips it otherwise."""

import importlib
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from engagement.backends import database_backend
from engagement.history_build import HistoryBuilder
from engagement.scoring import workspace_rescore
from tests.engagement.helpers import apply, group, track
from tests.engagement.test_history import day
from tests.engagement.test_scoring import snapshot

pytestmark = pytest.mark.postgresql  # pg_prewarm is PostgreSQL's

migration = importlib.import_module("engagement.migrations.0024_pg_prewarm")


@pytest.fixture(autouse=True)
def pg_prewarm_available(db):
    """pg_prewarm ships with PostgreSQL (contrib); a server built without it skips these."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm'")
        if cursor.fetchone() is None:
            pytest.skip("this PostgreSQL has no pg_prewarm")


@pytest.fixture
def ann_and_bob(acme):
    """Acme with Ann (two reports today, a login three days ago) and Bob (a login) in Acme Co."""
    apply(
        acme,
        group("ann", "acme-co"),
        group("bob", "acme-co"),
        track("ann", "Report_Created", times=2),
        track("ann", "Login", days_ago=3),
        track("bob", "Login"),
    )
    rollup_statistics()
    return acme


def rollup_statistics() -> None:
    """Fresh planner statistics of the rollups, which the prefetch estimates a product's by."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE engagement_eventrollup")


def prefetch(tenant) -> bool:
    return database_backend().rollups_prefetch(tenant.workspace.product_id)


def prefetches(queries) -> int:
    return sum("pg_prewarm(" in q["sql"] for q in queries)


def extension_installed() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm'")
        return cursor.fetchone() is not None


def extension_drop() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DROP EXTENSION IF EXISTS pg_prewarm")


def test_a_full_rescore_and_a_history_build_ask_for_the_rollups_first(ann_and_bob):
    assert extension_installed()  # the test database was migrated by a superuser

    with CaptureQueriesContext(connection) as queries:
        workspace_rescore(workspace_id=ann_and_bob.workspace.id)
    assert prefetches(queries) == 1
    assert snapshot(ann_and_bob)["users"]["ann"][0] > 0  # her engagement score

    builder = HistoryBuilder(workspace=ann_and_bob.workspace, first=day(5), last=day(1))
    with CaptureQueriesContext(connection) as queries:
        try:
            users, _accounts = builder.build()
        finally:
            builder.close()
    assert prefetches(queries) == 1
    assert users > 0


def test_nothing_is_asked_without_the_extension_and_scores_are_the_same(ann_and_bob):
    workspace_rescore(workspace_id=ann_and_bob.workspace.id)
    with_prefetch = snapshot(ann_and_bob)
    extension_drop()  # rolled back with the test's transaction

    assert prefetch(ann_and_bob) is False
    with CaptureQueriesContext(connection) as queries:
        workspace_rescore(workspace_id=ann_and_bob.workspace.id)
    assert prefetches(queries) == 0
    assert snapshot(ann_and_bob) == with_prefetch


def test_nothing_is_asked_when_the_rollups_exceed_the_cache_postgresql_plans_with(ann_and_bob):
    assert prefetch(ann_and_bob) is True
    with connection.cursor() as cursor:
        # One page: the rollups' two indexes alone take more.
        cursor.execute("SET LOCAL effective_cache_size = '8kB'")
    assert prefetch(ann_and_bob) is False


def test_a_product_with_less_than_a_fiftieth_of_the_rollups_is_not_asked(acme, globex):
    # Acme's 400 event names of a day against Globex's one rollup row.
    apply(acme, *(track("ann", f"Feature_{n:03}_Used") for n in range(400)))
    apply(globex, track("gil", "Login"))
    rollup_statistics()

    assert prefetch(acme) is True
    assert prefetch(globex) is False
    with CaptureQueriesContext(connection) as queries:
        workspace_rescore(workspace_id=globex.workspace.id)
    assert prefetches(queries) == 0


class _Editor:
    """What the migration's function reads of a schema editor: its connection."""

    connection = connection


def test_the_migration_creates_the_extension_where_the_role_may_and_skips_it_otherwise(db):
    extension_drop()
    role = f"eds_plain_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {role} NOLOGIN")  # rolled back with the test
        cursor.execute(f"SET ROLE {role}")
        try:
            migration.pg_prewarm_create(None, _Editor())  # refused: no error, nothing created
            cursor.execute("SELECT 1")  # the transaction is still usable
        finally:
            cursor.execute("RESET ROLE")
    assert not extension_installed()

    migration.pg_prewarm_create(None, _Editor())
    assert extension_installed()


def test_nothing_is_asked_of_a_role_that_may_not_call_pg_prewarm(ann_and_bob):
    role = f"eds_plain_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute("REVOKE EXECUTE ON FUNCTION pg_prewarm FROM PUBLIC")  # rolled back
        cursor.execute(f"CREATE ROLE {role} NOLOGIN")
        cursor.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
        cursor.execute(f"SET ROLE {role}")
        try:
            assert prefetch(ann_and_bob) is False  # no error either
        finally:
            cursor.execute("RESET ROLE")
    assert prefetch(ann_and_bob) is True
