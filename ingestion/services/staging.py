"""PostgreSQL's route to applying claimed requests: their messages are expanded from the stored
JSON and deduplicated in SQL, and their tracks, nearly all of the traffic, go to engagement's
staging table without a Python object per track; only identify and group messages, whose traits
merge in Python, are loaded."""

# SQL names its session tables (ingestion/session_tables.py, fixed names); every value is a
# query parameter.
# ruff: noqa: S608

from __future__ import annotations

import json
from collections.abc import Sequence

from django.db import connection

from engagement.track_staging import StagedTracks, staged_tracks_start
from ingestion import acceptance
from ingestion.services.dedup import staged_messages_claim
from ingestion.services.queue import ClaimedRequest, ClaimedUnderKeys, SessionClaim
from ingestion.services.suppression import staged_suppressed_unstage
from ingestion.session_tables import STAGED_MESSAGES

# The claimed rows' messages, expanded from their stored JSON, less drop markers: a track as its
# fields, any other message whole, each with its place in the rows (the order they were accepted
# in) and its SeenMessage key (seen_message_key, in SQL). Which rows: every claimed row under
# the given keys, read where the claim found them stored (not looked up by id in the primary
# key, which cost 57 against 33 ms for 40,000 rows), or the requests listed, each a row or, in
# a row of several requests, the places of its messages there; the id range lets PostgreSQL
# read those through the primary key (a queue table has dead rows between its live ones).
_STAGE_MESSAGES = """
    INSERT INTO {staged} (type, message_id, message_key, request_id, place,
                                   user_tid, group_tid, name, ms, body)
    SELECT type, message_id, md5(%(product_prefix)s || message_id)::uuid, request_id, place,
           CASE WHEN type = 'track' THEN body->>'userId' END,
           CASE WHEN type = 'track' THEN body->>'groupId' END,
           CASE WHEN type = 'track' THEN body->>'event' END,
           CASE WHEN type = 'track' THEN (body->>'timestamp')::bigint END,
           CASE WHEN type <> 'track' THEN body END
    FROM (
        SELECT m.body->>'type' AS type, m.body->>'messageId' AS message_id, m.body,
               a.id AS request_id, m.place
        FROM {source}
        CROSS JOIN LATERAL jsonb_array_elements(a.messages) WITH ORDINALITY AS m(body, place)
        WHERE {selection} AND m.body->>'type' <> %(drop)s) AS expanded"""
_UNDER_KEYS = (
    "ingestion_acceptedrequest a",
    "a.ctid = ANY(ARRAY("
    "SELECT c.tid FROM {claim} c WHERE c.key_digest = ANY(%(digests)s::text[])))",
)
_LISTED = (
    "ingestion_acceptedrequest a JOIN unnest(%(ids)s::bigint[], %(firsts)s::bigint[], "
    "%(lasts)s::bigint[]) AS listed(id, first_place, last_place) ON listed.id = a.id",
    "a.id BETWEEN %(first)s AND %(last)s "
    "AND m.place BETWEEN listed.first_place AND listed.last_place",
)
# The unique tracks, once repeats are unstaged, into the table engagement reads them from.
_HAND_OVER_TRACKS = (
    f"{StagedTracks.INSERT_INTO} "  # noqa: S608 - fixed names
    "SELECT user_tid, group_tid, name, ms FROM {staged} WHERE type = 'track'"
)


def messages_stage(
    product_id: int, requests: Sequence[ClaimedRequest], under_keys: ClaimedUnderKeys | None
) -> tuple[list[tuple[int, dict]], StagedTracks]:
    """Stage the messages of these requests, or with `under_keys` of every claimed row under
    those keys, less drop markers and repeats (their messageIds claimed): the tracks in
    engagement's staging table, the other messages returned with the id of their row."""
    params: dict = {"drop": acceptance.DROP, "product_prefix": f"{product_id}:"}
    claim = ""
    if under_keys is not None:
        batch = under_keys.batch
        assert isinstance(batch, SessionClaim), "staged from the rows a session claim lists"
        source, selection = _UNDER_KEYS
        claim = batch.claim.name
        params.update(digests=list(under_keys.digests))
    else:
        ids = [request.id for request in requests]
        source, selection = _LISTED
        params.update(
            first=min(ids),
            last=max(ids),
            ids=_bigint_array(ids),
            firsts=_bigint_array([request.places[0] for request in requests]),
            lasts=_bigint_array([request.places[1] for request in requests]),
        )
    staged = STAGED_MESSAGES.start()
    with connection.cursor() as cursor:
        selected = selection.format(claim=claim)
        cursor.execute(
            _STAGE_MESSAGES.format(staged=staged, source=source, selection=selected), params
        )
    staged_suppressed_unstage(product_id, staged)
    staged_messages_claim(product_id=product_id, staged=staged)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT request_id, body::text FROM {staged} WHERE type <> 'track'")
        others = [(request_id, json.loads(body)) for request_id, body in cursor.fetchall()]
        staged_tracks = staged_tracks_start()
        cursor.execute(_HAND_OVER_TRACKS.format(staged=staged))
    return others, staged_tracks


def _bigint_array(ids: Sequence[int]) -> str:
    """PostgreSQL's text form of an array of integers, for a `%s::bigint[]` parameter: one
    string to send instead of a list the driver formats element by element in Python."""
    return "{" + ",".join(map(str, ids)) + "}"
