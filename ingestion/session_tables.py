"""PostgreSQL: the tables one drain's steps hand each other, as values.

A drain's claim, its staged messages and the messageIds it claimed live in temporary tables of
the drain's transaction (so the rows never travel to Python and back). Each is a `SessionTable`
defined here once, with its columns; a step that fills one returns it (inside a typed value such
as `queue.ClaimedBatch`), and the steps that read it take it as an argument and use its `name`,
never a name of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection


@dataclass(frozen=True, slots=True)
class SessionTable:
    name: str
    columns: str

    def start(self) -> SessionTable:
        """The table, empty, for the rest of this transaction (call it inside one)."""
        # ON COMMIT DROP: nothing of the table outlives the transaction, so a transaction pooler
        # (PgBouncer, pool_mode=transaction) may hand the next transaction any server session,
        # and a deploy that changes the columns never meets a session's older table. Creating it
        # per transaction measured the same as keeping it per session, which empties it at every
        # commit anyway (docs/benchmarks.md, "Behind PgBouncer"). IF NOT EXISTS and the
        # TRUNCATE: a second start in the same transaction empties it.
        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS {self.name} ({self.columns}) ON COMMIT DROP"
            )
            cursor.execute(f"TRUNCATE {self.name}")
        return self

    def __str__(self) -> str:
        return self.name


# The rows a drain locked (queue.claim_in_session_table), each with where it is stored (`tid`:
# a row locked by the drain's transaction stays where it is until that transaction ends).
CLAIM = SessionTable(
    "eds_claim",
    "id bigint NOT NULL, tid tid NOT NULL, received_at timestamptz NOT NULL, "
    "endpoint text NOT NULL, "
    "key_digest text NOT NULL, message_count integer NOT NULL, has_drops boolean NOT NULL, "
    "request_count integer NOT NULL",
)
# One product's claimed messages, expanded from their rows (staging.messages_stage).
STAGED_MESSAGES = SessionTable(
    "eds_stage_message",
    "type text NOT NULL, message_id text, message_key uuid, request_id bigint, place bigint, "
    "user_tid text, group_tid text, name text, ms bigint, body jsonb",
)
# The messageIds of the staged messages this drain claimed (dedup.staged_messages_claim).
CLAIMED_KEYS = SessionTable("eds_claimed_key", "message_key uuid NOT NULL")
