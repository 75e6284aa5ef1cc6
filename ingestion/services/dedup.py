"""Each messageId is applied once per product: a SeenMessage row claims it in the transaction
that applies the message, so an id is taken only if that transaction commits.

The claim is written twice, because the two routes hold their messages in different places:
in Python for messages loaded into the worker (`unseen_messages`, SQLite's route and the
fallback of a request that failed whole), and in SQL for messages staged in PostgreSQL
(`staged_messages_claim`). Both key a row by `seen_message_key` (md5 of "<product>:<id>") and
keep the first of repeats; tests/ingestion/test_dedup_routes.py runs the same cases through
both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from ingestion import acceptance
from ingestion.models import SeenMessage, seen_message_key

_SEEN_CHUNK = 1000


def seen_messages_claim(*, product_id: int, message_ids: Sequence[str]) -> set[str]:
    """Record these messageIds as seen for the product; return the ones not seen before.

    Must run inside the transaction that applies the messages: an id is claimed only if that
    transaction commits. A concurrent transaction claiming the same id waits on the primary
    key and then finds it taken, so two workers never both apply one message. Ids are
    inserted in the order of their keys so two such transactions cannot deadlock.
    """
    claimed: set[str] = set()
    if not message_ids:
        return claimed
    table = connection.ops.quote_name(SeenMessage._meta.db_table)
    seen_at = connection.ops.adapt_datetimefield_value(timezone.now())
    key_field = SeenMessage._meta.pk
    by_key = {
        str(key_field.get_db_prep_value(seen_message_key(product_id, message_id), connection)): (
            message_id
        )
        for message_id in set(message_ids)
    }
    ordered = sorted(by_key)
    with connection.cursor() as cursor:
        for start in range(0, len(ordered), _SEEN_CHUNK):
            chunk = ordered[start : start + _SEEN_CHUNK]
            values = ", ".join(["(%s, %s, %s, %s)"] * len(chunk))
            params: list = []
            for key in chunk:
                params.extend((key, product_id, by_key[key], seen_at))
            cursor.execute(
                f"INSERT INTO {table} (message_key, product_id, message_id, seen_at) "  # noqa: S608
                f"VALUES {values} ON CONFLICT (message_key) DO NOTHING RETURNING message_key",
                params,
            )
            claimed.update(by_key[str(row[0])] for row in cursor.fetchall())
    return claimed


def unseen_messages(product_id: int, messages: Iterable[dict]) -> list[dict]:
    """These stored messages less drop markers and repeats: a messageId seen earlier among
    them, or in an earlier drain. Their ids are claimed (see seen_messages_claim)."""
    candidates: list[dict] = []
    ids: set[str] = set()
    for message in messages:
        if acceptance.is_drop(message):
            continue
        message_id = message.get("messageId")
        if message_id is not None:
            if message_id in ids:
                continue
            ids.add(message_id)
        candidates.append(message)
    claimed = seen_messages_claim(product_id=product_id, message_ids=list(ids))
    return [
        message
        for message in candidates
        if message.get("messageId") is None or message["messageId"] in claimed
    ]


# Claim the staged messageIds, each at its first place (sorted by key, as in seen_messages_claim:
# two workers cannot deadlock), keep the claimed keys, and count them against the staged
# messages that have a key. Equal counts (the common case) mean no repeat: nothing to unstage.
_CLAIM_STAGED = """
    WITH firsts AS (
        SELECT DISTINCT ON (message_key) message_key, message_id
        FROM eds_stage_message WHERE message_key IS NOT NULL
        ORDER BY message_key, request_id, place),
    claimed AS (
        INSERT INTO ingestion_seenmessage (message_key, product_id, message_id, seen_at)
        SELECT message_key, %(product)s, message_id, %(now)s FROM firsts
        ON CONFLICT (message_key) DO NOTHING RETURNING message_key),
    kept AS (INSERT INTO eds_claimed_key SELECT message_key FROM claimed)
    SELECT (SELECT count(*) FROM claimed),
           (SELECT count(*) FROM eds_stage_message WHERE message_key IS NOT NULL)"""
# Otherwise unstage every message that is not a claimed first: a repeat within the staged
# messages, or an id an earlier drain already claimed. (Ranking the repeats with a window
# function instead sorts the messages whole, and costs more than the claim.)
_UNSTAGE_REPEATS = """
    DELETE FROM eds_stage_message s
    WHERE s.message_key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM (SELECT DISTINCT ON (message_key) message_key, request_id, place
                       FROM eds_stage_message WHERE message_key IS NOT NULL
                       ORDER BY message_key, request_id, place) AS f
        JOIN eds_claimed_key c ON c.message_key = f.message_key
        WHERE f.message_key = s.message_key AND f.request_id = s.request_id
          AND f.place = s.place)"""


def staged_messages_claim(*, product_id: int) -> None:
    """PostgreSQL: claim the messageIds of the messages staged in eds_stage_message (see
    staging.messages_stage) and unstage the repeats, in SQL."""
    with connection.cursor() as cursor:
        # Session-local; ON COMMIT DELETE ROWS and the TRUNCATE keep each call's rows its own.
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS eds_claimed_key (message_key uuid NOT NULL) "
            "ON COMMIT DELETE ROWS"
        )
        cursor.execute("TRUNCATE eds_claimed_key")
        cursor.execute(_CLAIM_STAGED, {"product": product_id, "now": timezone.now()})
        claimed, keyed = cursor.fetchone()
        if claimed != keyed:
            cursor.execute(_UNSTAGE_REPEATS)


def seen_messages_purge(*, older_than_days: int) -> int:
    """Forget messageIds seen longer ago than the dedup window (INGESTION_DEDUP_DAYS)."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted, _ = SeenMessage.objects.filter(seen_at__lt=cutoff).delete()
    return deleted
