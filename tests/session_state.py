"""The transaction-pooler guard: every SQL statement the service sends through Django is checked
for session state that would outlive its transaction (docs/deployment.md, "Behind PgBouncer").

Behind PgBouncer in transaction mode each transaction may run on a different server session, so
nothing a statement leaves in its session may be needed, or be in the way, after the
transaction ends. tests/conftest.py installs `guard` on every PostgreSQL connection of the test
run and fails a test whose service code sent one of the statements `violation` refuses; the
forms the statement itself gives away are checked here, the rest (a server-side cursor declared
WITH HOLD) from the cursor. Statements sent by test or benchmark code (a test that sets a
lock_timeout on purpose) are not the service's and are let through.
"""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path

from django.db.backends.signals import connection_created

ROOT = Path(__file__).resolve().parents[1]
_OWN_CODE = (str(ROOT / "tests") + "/", str(ROOT / "bench") + "/")
_PROJECT = str(ROOT) + "/"
_VENV = str(ROOT / ".venv") + "/"

# A first look that lets nearly every statement through without the finer patterns below.
_SUSPECT = re.compile(
    r"\bSET\b|\bRESET\b|\bTEMP|advisory|\bHOLD\b|\bPREPARE\b|\bLISTEN\b|\bDISCARD\b|set_config",
    re.IGNORECASE,
)
_COMMENTS = re.compile(r"^\s*(--[^\n]*\n\s*|/\*.*?\*/\s*)*", re.DOTALL)
# SET LOCAL, SET TRANSACTION ... and SET CONSTRAINTS last as long as the transaction only.
_SESSION_SET = re.compile(r"(SET|RESET)\b(?!\s+(LOCAL|TRANSACTION|CONSTRAINTS)\b)", re.IGNORECASE)
_LOCAL_SET = re.compile(r"SET\s+(LOCAL|TRANSACTION|CONSTRAINTS)\b", re.IGNORECASE)
_SESSION_SET_CONFIG = re.compile(r"set_config\s*\([^;]*,\s*false\s*\)", re.IGNORECASE)
_TEMP_TABLE = re.compile(r"CREATE\s+(GLOBAL\s+|LOCAL\s+)?(TEMP|TEMPORARY)\s+TABLE\b", re.IGNORECASE)
_ON_COMMIT_DROP = re.compile(r"\bON\s+COMMIT\s+DROP\b", re.IGNORECASE)
# The session-level advisory locks; the _xact_ ones end with the transaction.
_SESSION_ADVISORY = re.compile(r"pg_(try_)?advisory_(un)?lock(_shared|_all)?\s*\(", re.IGNORECASE)
_HELD_CURSOR = re.compile(r"DECLARE\b.*\bWITH\s+HOLD\b", re.IGNORECASE | re.DOTALL)
_SESSION_ONLY = re.compile(r"(PREPARE|EXECUTE|DEALLOCATE|LISTEN|UNLISTEN|DISCARD|LOAD)\b", re.I)


def violation(sql: str, *, in_transaction: bool) -> str | None:
    """Why `sql` would leave session state behind its transaction (or rely on it); None if it
    does not. `in_transaction`: the statement runs inside an explicit transaction."""
    if not _SUSPECT.search(sql):
        return None
    statement = _COMMENTS.sub("", sql, count=1)
    if _SESSION_SET.match(statement):
        return "SET without LOCAL lasts for the session: use SET LOCAL inside a transaction"
    if _LOCAL_SET.match(statement) and not in_transaction:
        return "SET LOCAL outside a transaction does nothing"
    if _SESSION_SET_CONFIG.search(statement):
        return "set_config(..., false) lasts for the session: pass true (this transaction)"
    if _TEMP_TABLE.search(statement):
        if not _ON_COMMIT_DROP.search(statement):
            return "a temporary table without ON COMMIT DROP outlives its transaction"
        if not in_transaction:
            return "a temporary table ON COMMIT DROP created outside a transaction is gone at once"
    if _SESSION_ADVISORY.search(statement):
        return "a session-level advisory lock: use pg_advisory_xact_lock"
    if _HELD_CURSOR.match(statement):
        return "a cursor WITH HOLD outlives its transaction"
    if _SESSION_ONLY.match(statement):
        return f"{_SESSION_ONLY.match(statement).group(1).upper()} needs the same session later"
    return None


def _sent_by_test_code() -> bool:
    """Whether the innermost frame of this project's code (not the venv's) is a test's or a
    benchmark's: such a statement is the test's own doing, not the service's."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_PROJECT) and not name.startswith(_VENV) and name != __file__:
            return name.startswith(_OWN_CODE)
        frame = frame.f_back
    return True


class SessionStateGuard:
    """Records the service's statements that `violation` refuses, from every thread."""

    def __init__(self) -> None:
        self.found: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, execute, sql, params, many, context):
        connection = context["connection"]
        in_transaction = not connection.get_autocommit()
        problem = violation(str(sql), in_transaction=in_transaction)
        cursor = getattr(context["cursor"], "cursor", None)
        if problem is None and getattr(cursor, "withhold", False):
            problem = "a server-side cursor WITH HOLD (an .iterator() outside atomic()) outlives "
            problem += "its transaction"
        elif problem is None and getattr(cursor, "name", None) and not in_transaction:
            problem = "a server-side cursor outside a transaction"
        if problem is not None and not _sent_by_test_code():
            with self._lock:
                self.found.append(f"{problem}: {str(sql)[:200]}")
        return execute(sql, params, many, context)

    def taken(self) -> list[str]:
        with self._lock:
            found, self.found = self.found, []
        return found


guard = SessionStateGuard()


def _install(connection) -> None:
    if connection.vendor == "postgresql" and guard not in connection.execute_wrappers:
        connection.execute_wrappers.append(guard)


def _on_connection_created(sender, connection, **kwargs) -> None:
    _install(connection)


def install() -> None:
    """Check every PostgreSQL connection's statements, those open now and those opened later
    (on any thread)."""
    from django.db import connections

    for connection in connections.all(initialized_only=True):
        _install(connection)
    connection_created.connect(_on_connection_created, weak=False)
