"""Each messageId is applied once per product: a SeenMessage row claims it in the transaction
that applies the message, so an id is taken only if that transaction commits.

The claim is written twice, because the two routes hold their messages in different places:
in Python for messages loaded into the worker (`unseen_messages`, SQLite's route and the
fallback of a request that failed whole), and in SQL for messages staged in PostgreSQL
(`staged_messages_claim`). Both key a row by `seen_message_key` (md5 of "<product>:<id>") and
keep the first of repeats, with its sender's keyed hashes (`seen_message_sender_hash`, for
erasure); tests/ingestion/test_dedup_routes.py runs the same cases through both. The SQL claim
tries a plain insert before the one that skips seen ids (see _staged_claim).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from ingestion import acceptance
from ingestion.models import SeenMessage, seen_message_key
from ingestion.session_tables import CLAIMED_KEYS, SessionTable

_SEEN_CHUNK = 1000
_SENDER_SALT = "ingestion.seen_message.sender"

# A message's sender as SeenMessage keeps it: (user hash, account hash), either None.
Sender = tuple[int | None, int | None]


@functools.cache
def _sender_key(secret: str) -> bytes:
    # Derived from SECRET_KEY as salted_hmac derives a suppression's key, under a salt of its own.
    return hashlib.sha256((_SENDER_SALT + secret).encode()).digest()


def seen_message_sender_hash(product_id: int, tracking_id: str) -> int:
    """A userId's or groupId's keyed hash as SeenMessage stores it: HMAC-SHA256 of
    "<product>:<id>" under a key derived from SECRET_KEY, its first 8 bytes as a signed
    integer. It cannot be checked against guessed ids without the key, and an erasure deletes
    the rows that carry its person's."""
    digest = hmac.new(
        _sender_key(settings.SECRET_KEY), f"{product_id}:{tracking_id}".encode(), hashlib.sha256
    ).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _sender_hash_params(product_id: int) -> dict:
    """The parameters of _SENDER_HASH, the same HMAC in SQL: PostgreSQL's sha256() takes no key,
    so the key's inner and outer pads are prepended as HMAC defines them. They reach the
    statement's text (and a server log quoting a failed statement): the key is this hash's own,
    and tells nothing of SECRET_KEY or of a suppression's key."""
    key = _sender_key(settings.SECRET_KEY).ljust(64, b"\0")  # SHA-256's block
    return {
        "sender_prefix": f"{product_id}:",
        "inner_pad": bytes(byte ^ 0x36 for byte in key),
        "outer_pad": bytes(byte ^ 0x5C for byte in key),
    }


_SENDER_HASH = (
    "('x' || left(encode(sha256(%(outer_pad)s || sha256(%(inner_pad)s || "
    "convert_to(%(sender_prefix)s || {tracking_id}, 'UTF8'))), 'hex'), 16))::bit(64)::bigint"
)


def message_sender(product_id: int, message: dict, known: dict[str, int]) -> Sender:
    """The hashes of a stored message's userId and, for a group call, its groupId; `known`
    keeps the hashes computed so far, one per id (a batch repeats its senders)."""

    def hashed(tracking_id: object) -> int | None:
        if not isinstance(tracking_id, str):
            return None
        if tracking_id not in known:
            known[tracking_id] = seen_message_sender_hash(product_id, tracking_id)
        return known[tracking_id]

    group = message.get("groupId") if message.get("type") == "group" else None
    return hashed(message.get("userId")), hashed(group)


def seen_messages_claim(
    *,
    product_id: int,
    message_ids: Sequence[str],
    senders: Mapping[str, Sender] | None = None,
) -> set[str]:
    """Record these messageIds as seen for the product; return the ones not seen before.

    Must run inside the transaction that applies the messages: an id is claimed only if that
    transaction commits. A concurrent transaction claiming the same id waits on the primary
    key and then finds it taken, so two workers never both apply one message. Ids are
    inserted in the order of their keys so two such transactions cannot deadlock. `senders`
    gives each id's sender (message_sender); an id without one is stored without.
    """
    claimed: set[str] = set()
    if not message_ids:
        return claimed
    senders = senders or {}
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
            values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(chunk))
            params: list = []
            for key in chunk:
                user_hash, account_hash = senders.get(by_key[key], (None, None))
                params.extend((key, product_id, by_key[key], seen_at, user_hash, account_hash))
            cursor.execute(
                f"INSERT INTO {table} (message_key, product_id, message_id, seen_at, "  # noqa: S608
                f"user_hash, account_hash) VALUES {values} "
                "ON CONFLICT (message_key) DO NOTHING RETURNING message_key",
                params,
            )
            claimed.update(by_key[str(row[0])] for row in cursor.fetchall())
    return claimed


def unseen_messages(product_id: int, messages: Iterable[dict]) -> list[dict]:
    """These stored messages less drop markers and repeats: a messageId seen earlier among
    them, or in an earlier drain. Their ids are claimed (see seen_messages_claim)."""
    candidates: list[dict] = []
    senders: dict[str, Sender] = {}
    known: dict[str, int] = {}
    for message in messages:
        if acceptance.is_drop(message):
            continue
        message_id = message.get("messageId")
        if message_id is not None:
            if message_id in senders:
                continue
            senders[message_id] = message_sender(product_id, message, known)
        candidates.append(message)
    claimed = seen_messages_claim(product_id=product_id, message_ids=list(senders), senders=senders)
    return [
        message
        for message in candidates
        if message.get("messageId") is None or message["messageId"] in claimed
    ]


# Claim the staged messageIds, each at its first place (sorted by key, as in seen_messages_claim:
# two workers cannot deadlock), with their senders' hashes, and count them against the staged
# messages that have a key. Equal counts (the common case) mean no repeat: nothing to unstage.
# The statement that skips seen ids also keeps the keys it claimed (_KEEP_CLAIMED): a first that
# was not claimed is unstaged too. The plain insert claims every first or fails, so it keeps
# none. A batch repeats its users: each userId is hashed once, and joined before the one sort
# (hashing each message's costs three times as much; joining after it, a second sort);
# groupIds, of group calls only, are few.
_CLAIM_STAGED = f"""
    WITH users AS MATERIALIZED (
        SELECT user_tid, {_SENDER_HASH.format(tracking_id="user_tid")} AS user_hash
        FROM (SELECT DISTINCT user_tid FROM {{staged}}
              WHERE message_key IS NOT NULL AND user_tid IS NOT NULL) AS distinct_users),
    firsts AS (
        SELECT DISTINCT ON (s.message_key) s.message_key, s.message_id,
               COALESCE(u.user_hash, {_SENDER_HASH.format(tracking_id="(s.body->>'userId')")})
                   AS user_hash,
               CASE WHEN s.type = 'group' THEN s.body->>'groupId' END AS group_tid
        FROM {{staged}} s LEFT JOIN users u ON u.user_tid = s.user_tid
        WHERE s.message_key IS NOT NULL
        ORDER BY s.message_key, s.request_id, s.place),
    claimed AS (
        INSERT INTO ingestion_seenmessage
            (message_key, product_id, message_id, seen_at, user_hash, account_hash)
        SELECT message_key, %(product)s, message_id, %(now)s, user_hash,
               {_SENDER_HASH.format(tracking_id="group_tid")}
        FROM firsts
        {{on_conflict}} RETURNING message_key){{keep_claimed}}
    SELECT (SELECT count(*) FROM claimed),
           (SELECT count(*) FROM {{staged}} WHERE message_key IS NOT NULL)"""  # noqa: S608 - fixed SQL
_KEEP_CLAIMED = ",\n    kept AS (INSERT INTO {claimed_keys} SELECT message_key FROM claimed)"
# Otherwise, after the plain insert, unstage every message that is not the first of its id: a
# repeat within the staged messages.
_UNSTAGE_LATER_REPEATS = """
    DELETE FROM {staged} s
    WHERE s.message_key IS NOT NULL AND EXISTS (
        SELECT 1 FROM {staged} e
        WHERE e.message_key = s.message_key
          AND (e.request_id, e.place) < (s.request_id, s.place))"""
# After the statement that skips seen ids, unstage every message that is not a claimed first: a
# repeat within the staged messages, or an id an earlier drain already claimed. (Ranking the
# repeats with a window function instead sorts the messages whole, and costs more than the
# claim.)
_UNSTAGE_REPEATS = """
    DELETE FROM {staged} s
    WHERE s.message_key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM (SELECT DISTINCT ON (message_key) message_key, request_id, place
                       FROM {staged} WHERE message_key IS NOT NULL
                       ORDER BY message_key, request_id, place) AS f
        JOIN {claimed_keys} c ON c.message_key = f.message_key
        WHERE f.message_key = s.message_key AND f.request_id = s.request_id
          AND f.place = s.place)"""


_SKIP_SEEN = "ON CONFLICT (message_key) DO NOTHING"
_UNIQUE_VIOLATION = "23505"  # SQLSTATE unique_violation
# After a claim that met an id seen in an earlier drain, this many claims of the thread go
# straight to the statement that skips seen ids (see _staged_claim).
_CLAIMS_SKIPPING_AFTER_A_REPEAT = 16


class _ClaimRoute(threading.local):
    """The choice between the two claim statements, per thread (a drain's connection: see
    drain.accepted_requests_drain_for)."""

    skipping_claims_left = 0


_claim_route = _ClaimRoute()


def staged_messages_claim(*, product_id: int, staged: SessionTable) -> None:
    """PostgreSQL: claim the messageIds of the messages staged in `staged` (see
    staging.messages_stage) and unstage the repeats, in SQL."""
    params = {"product": product_id, "now": timezone.now(), **_sender_hash_params(product_id)}
    with connection.cursor() as cursor:
        claimed, keyed, claimed_keys = _staged_claim(cursor, staged, params)
        if claimed == keyed:
            return
        if claimed_keys is None:
            cursor.execute(_UNSTAGE_LATER_REPEATS.format(staged=staged))
        else:
            cursor.execute(_UNSTAGE_REPEATS.format(staged=staged, claimed_keys=claimed_keys))


def _staged_claim(
    cursor: CursorWrapper, staged: SessionTable, params: dict
) -> tuple[int, int, SessionTable | None]:
    """Run _CLAIM_STAGED: (ids claimed, staged messages with an id, and after the statement
    that skips seen ids the table of the keys it claimed; None after the plain insert, which
    claimed every first).

    A plain INSERT first, in a savepoint: an id seen in an earlier drain (an SDK's retry) is
    rare, and `ON CONFLICT DO NOTHING` costs every row a speculative insertion (a second look
    in the key's index and a second WAL record), a third of the drain's dedup time. An id
    already there, or claimed meanwhile by another drain that then commits, fails the INSERT
    with a unique violation; the savepoint is rolled back and the statement that skips seen ids
    runs instead, as it does for the next few claims, so a stream full of retries pays the
    failed attempt once in a while rather than every time."""
    if _claim_route.skipping_claims_left > 0:
        _claim_route.skipping_claims_left -= 1
    else:
        try:
            with transaction.atomic():
                plain = _CLAIM_STAGED.format(staged=staged, on_conflict="", keep_claimed="")
                cursor.execute(plain, params)
                claimed, keyed = cursor.fetchone()
                return claimed, keyed, None
        except IntegrityError as error:
            if getattr(error.__cause__, "sqlstate", None) != _UNIQUE_VIOLATION:
                raise
            _claim_route.skipping_claims_left = _CLAIMS_SKIPPING_AFTER_A_REPEAT
    claimed_keys = CLAIMED_KEYS.start()
    keep_claimed = _KEEP_CLAIMED.format(claimed_keys=claimed_keys)
    cursor.execute(
        _CLAIM_STAGED.format(staged=staged, on_conflict=_SKIP_SEEN, keep_claimed=keep_claimed),
        params,
    )
    claimed, keyed = cursor.fetchone()
    return claimed, keyed, claimed_keys


def seen_messages_purge(*, older_than_days: int) -> int:
    """Forget messageIds seen longer ago than the dedup window (INGESTION_DEDUP_DAYS)."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted, _ = SeenMessage.objects.filter(seen_at__lt=cutoff).delete()
    return deleted
