"""Which database errors pass if the same work is simply run again: a deadlock, a serialization
failure, a lock or statement timeout, a lost or refused connection, a server out of room.
Anything else (a refused value, a missing table, a bug) fails the same way every time."""

from __future__ import annotations

from django.db import InterfaceError, OperationalError

# PostgreSQL SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html), and the
# classes whose every code is such a cause.
_TRANSIENT_STATES = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available (lock_timeout, NOWAIT)
        "57014",  # query_canceled (statement_timeout, a cancel request)
        "57P01",  # admin_shutdown (pg_terminate_backend, a fast shutdown)
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now (starting up, in recovery)
        "57P05",  # idle_session_timeout
        "25P03",  # idle_in_transaction_session_timeout
    }
)
_TRANSIENT_CLASSES = (
    "08",  # connection_exception
    "53",  # insufficient_resources: disk full, out of memory, too many connections
)
# SQLite's: another connection holds the write lock past the busy timeout.
_SQLITE_TRANSIENT = ("database is locked", "database table is locked", "database is busy")


def is_transient(error: BaseException) -> bool:
    """Whether `error` (as Django raises it, its driver's error as the cause) would likely pass
    on a later try of the same work."""
    if isinstance(error, InterfaceError):  # the connection is closed or unusable
        return True
    if not isinstance(error, OperationalError):
        return False
    cause = error.__cause__
    state = getattr(cause, "sqlstate", None)
    if state is not None:
        return state in _TRANSIENT_STATES or state.startswith(_TRANSIENT_CLASSES)
    if type(cause).__module__ == "sqlite3":
        return any(text in str(cause) for text in _SQLITE_TRANSIENT)
    # PostgreSQL without a SQLSTATE: the driver lost or could not make the connection (server
    # gone, refused, a pool with none to give), which no server-side code describes.
    return True
