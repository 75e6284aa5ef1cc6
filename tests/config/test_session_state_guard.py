"""The transaction-pooler guard (tests/session_state.py) refuses what it must: each planted
statement below would leave session state behind its transaction, and the forms the service
uses pass."""

import pytest
from django.db import connection, transaction

from tests import session_state
from tests.session_state import SessionStateGuard, violation

pytestmark = pytest.mark.postgresql


@pytest.mark.parametrize(
    "sql",
    [
        "SET work_mem = '64MB'",
        "set statement_timeout to 1000",
        "SET SESSION synchronous_commit TO OFF",
        "RESET work_mem",
        "-- a comment first\nSET lock_timeout = '1s'",
        "SELECT set_config('work_mem', '64MB', false)",
        "CREATE TEMP TABLE eds_x (id bigint)",
        "CREATE TEMPORARY TABLE IF NOT EXISTS eds_x (id bigint) ON COMMIT DELETE ROWS",
        "SELECT pg_advisory_lock(42)",
        "SELECT pg_try_advisory_lock(1, 2)",
        "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
        "PREPARE q AS SELECT 1",
        "LISTEN eds_changes",
        "DISCARD ALL",
    ],
)
def test_session_level_forms_are_refused(sql):
    assert violation(sql, in_transaction=True) is not None


@pytest.mark.parametrize(
    "sql",
    [
        "SET LOCAL work_mem = '64MB'",
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        "SET TRANSACTION SNAPSHOT '00000003-0000001B-1'",
        "SELECT set_config('work_mem', '64MB', true)",
        "CREATE TEMP TABLE IF NOT EXISTS eds_claim (id bigint) ON COMMIT DROP",
        "SELECT pg_advisory_xact_lock(42)",
        "UPDATE engagement_user SET name = 'x' WHERE id = 1",
        "SELECT id FROM t WHERE settings = 1 ORDER BY id",
    ],
)
def test_transaction_level_forms_pass(sql):
    assert violation(sql, in_transaction=True) is None


def test_transaction_level_forms_outside_a_transaction_are_refused():
    assert violation("SET LOCAL work_mem = '64MB'", in_transaction=False)
    assert violation("CREATE TEMP TABLE x (id bigint) ON COMMIT DROP", in_transaction=False)


def _service_code(source: str):
    """`run` from `source`, compiled as if it were a module of the service (engagement/): the
    guard lets statements of test code through, so a planted statement must look like the
    service's."""
    import engagement

    namespace: dict = {}
    code = compile(source, engagement.__path__[0] + "/planted.py", "exec")
    exec(code, namespace)  # noqa: S102 (a fixed snippet: the planted service code)
    return namespace["run"]


@pytest.mark.django_db(transaction=True)
def test_a_planted_set_work_mem_is_caught_on_a_real_connection():
    """The guard as installed on a connection: the service's statement is recorded (and still
    runs: the test fails afterwards, not the service mid-way); the test's own is not."""
    run = _service_code(
        "def run(cursor):\n"
        "    cursor.execute(\"SET work_mem = '64MB'\")\n"
        "    cursor.execute('SHOW work_mem')\n"
        "    return cursor.fetchone()[0]\n"
    )
    guard = SessionStateGuard()
    with connection.execute_wrapper(guard), connection.cursor() as cursor:
        assert run(cursor) == "64MB"
        cursor.execute("RESET work_mem")  # the test's own statement: not recorded
        with transaction.atomic():
            cursor.execute("SELECT pg_advisory_xact_lock(7)")
    found = guard.taken()
    assert len(found) == 1 and "SET work_mem" in found[0]
    # The guard every test runs under (tests/conftest.py) saw it too; taken here, so that this
    # test, which planted it, passes.
    assert session_state.guard.taken() == found


_ITERATE = (
    "def run(products, atomic):\n"
    "    outside = [p.name for p in products.iterator(chunk_size=10)]\n"
    "    with atomic():\n"
    "        inside = [p.name for p in products.iterator(chunk_size=10)]\n"
    "    return outside, inside\n"
)


@pytest.mark.django_db(transaction=True)
def test_an_iterator_outside_a_transaction_is_caught_with_server_side_cursors(monkeypatch):
    """With Django's default (server-side cursors), an .iterator() in autocommit declares its
    cursor WITH HOLD: the guard catches it."""
    from engagement.models import Product

    Product.objects.create(name="Held")
    monkeypatch.setitem(connection.settings_dict, "DISABLE_SERVER_SIDE_CURSORS", False)
    run = _service_code(_ITERATE)
    guard = SessionStateGuard()
    with connection.execute_wrapper(guard):
        assert run(Product.objects.all(), transaction.atomic) == (["Held"], ["Held"])
    found = guard.taken()
    assert len(found) == 1 and "WITH HOLD" in found[0]
    assert session_state.guard.taken() == found


@pytest.mark.django_db(transaction=True)
def test_the_service_never_holds_a_cursor_past_its_transaction():
    """config/database.py turns server-side cursors off: an .iterator() outside a transaction
    (a form's ModelChoiceField renders its choices so, in the dashboard and the admin) holds
    nothing in the session."""
    from engagement.models import Product

    assert connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"] is True
    Product.objects.create(name="Held")
    guard = SessionStateGuard()
    with connection.execute_wrapper(guard):
        assert _service_code(_ITERATE)(Product.objects.all(), transaction.atomic) == (
            ["Held"],
            ["Held"],
        )
    assert guard.taken() == []
