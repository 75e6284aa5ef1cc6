"""The tally of accepted requests per ingestion key and minute, written by the drain."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from ingestion.models import AcceptedMinute
from ingestion.session_tables import SessionTable

# One statement per drain on PostgreSQL, from the rows the drain has locked (its claim table).
_TALLY_FROM_CLAIM = """
    INSERT INTO ingestion_acceptedminute (key_digest, minute, requests, last_received_at)
    SELECT key_digest, date_trunc('minute', received_at), sum(request_count), max(received_at)
    FROM {claim} GROUP BY key_digest, date_trunc('minute', received_at)"""


def accepted_minutes_record_claimed(claim: SessionTable) -> None:
    """PostgreSQL: tally the requests of this drain's claim (the session table `claim`)."""
    with connection.cursor() as cursor:
        cursor.execute(_TALLY_FROM_CLAIM.format(claim=claim))


def accepted_minutes_record(requests: Iterable[tuple[str, datetime]]) -> None:
    """Tally requests given as (key digest, accepted at), one per request."""
    tally: dict[tuple[str, datetime], list] = defaultdict(lambda: [0, None])
    for key_digest, received_at in requests:
        entry = tally[(key_digest, received_at.replace(second=0, microsecond=0))]
        entry[0] += 1
        entry[1] = received_at if entry[1] is None else max(entry[1], received_at)
    AcceptedMinute.objects.bulk_create(
        AcceptedMinute(key_digest=key, minute=minute, requests=count, last_received_at=last)
        for (key, minute), (count, last) in tally.items()
    )


def accepted_minutes_purge(*, older_than_days: int) -> int:
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted, _ = AcceptedMinute.objects.filter(minute__lt=cutoff).delete()
    return deleted
