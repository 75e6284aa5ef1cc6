"""Staged tracks: the one way tracks reach the event store, on every database.

`services.messages_apply` stages the tracks of the messages it is given here, and a caller whose
messages are already in the database (the ingestion drain on PostgreSQL) fills the table in its
own transaction with one INSERT ... SELECT and hands the handle over, so those tracks go from the
caller's rows to events and rollups without a Python object per track. Either way the event store
reads them from this table, and which account an event counts for is decided once, in SQL
(event_store). Engagement owns the table: its name, its columns and when it is emptied.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from engagement.backends import database_backend

# (user tracking id, account tracking id or None, event name, Unix milliseconds)
TrackRow = tuple[str, str | None, str, int]


class StagedTracks:
    """The session's staged tracks, one row per validated track message, in these columns:

    - `user_tracking_id` (text): the user's id in the product (`userId`);
    - `account_tracking_id` (text or NULL): the account the event belongs to, if the message
      names one (`context.groupId`);
    - `event_name` (text): the event;
    - `timestamp_ms` (bigint): when it happened, in Unix milliseconds.

    Rows are the caller's to add, with `INSERT_INTO` followed by a SELECT of those four columns,
    and must not change until `messages_apply` returns; they are gone at commit. An instance
    (from `staged_tracks_start`) says the table exists and was emptied in this transaction.
    """

    TABLE = "eds_staged_track"
    COLUMNS = ("user_tracking_id", "account_tracking_id", "event_name", "timestamp_ms")
    INSERT_INTO = f"INSERT INTO {TABLE} ({', '.join(COLUMNS)})"

    def add(self, rows: Sequence[TrackRow]) -> None:
        """Stage these tracks, one row each, in the columns above."""
        if rows:
            database_backend().staged_tracks_add(self.TABLE, self.COLUMNS, rows)

    def tracking_ids(self) -> tuple[set[str], set[str]]:
        """The user and the account tracking ids the staged tracks name."""
        users: set[str] = set()
        accounts: set[str] = set()
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT DISTINCT 'u', user_tracking_id FROM {self.TABLE} UNION ALL "  # noqa: S608
                f"SELECT DISTINCT 'a', account_tracking_id FROM {self.TABLE} "
                "WHERE account_tracking_id IS NOT NULL"
            )
            for kind, tracking_id in cursor.fetchall():
                (users if kind == "u" else accounts).add(tracking_id)
        return users, accounts


def staged_tracks_start() -> StagedTracks:
    """An empty staging table for this transaction's tracks, and its handle. Call it inside a
    transaction: the table is a temporary table, emptied here; on PostgreSQL it is dropped at
    commit, on SQLite (one process, no pooler) it stays in the session, empty until next time."""
    database_backend().staged_tracks_start(
        StagedTracks.TABLE,
        "user_tracking_id text, account_tracking_id text, event_name text, timestamp_ms bigint",
    )
    return StagedTracks()
