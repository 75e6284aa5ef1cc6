"""Tracks staged in PostgreSQL for `services.messages_apply`: the table engagement reads them from.

A caller whose messages are already in the database (the ingestion drain) fills this table in its
own transaction with one INSERT ... SELECT and hands the handle to `messages_apply`, so tracks go
from the caller's rows to events and rollups without a Python object per track. Engagement owns
the table: its name, its columns and when it is emptied.
"""

from __future__ import annotations

from django.db import connection

from engagement.backends import database_backend


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

    def tracking_ids(self) -> tuple[set[str], set[str]]:
        """The user and the account tracking ids the staged tracks name."""
        users: set[str] = set()
        accounts: set[str] = set()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT user_tracking_id, account_tracking_id "  # noqa: S608 - a fixed name
                f"FROM {self.TABLE} "
                "GROUP BY GROUPING SETS ((user_tracking_id), (account_tracking_id))"
            )
            for user_tid, account_tid in cursor.fetchall():
                if user_tid is not None:
                    users.add(user_tid)
                elif account_tid is not None:
                    accounts.add(account_tid)
        return users, accounts


def staged_tracks_start() -> StagedTracks:
    """PostgreSQL only: an empty staging table for this transaction's tracks, and its handle.

    The table is session-local (a temporary table); ON COMMIT DELETE ROWS and the TRUNCATE keep
    each call's rows its own.
    """
    database_backend().staged_tracks_start(
        StagedTracks.TABLE,
        "user_tracking_id text, account_tracking_id text, event_name text, timestamp_ms bigint",
    )
    return StagedTracks()
