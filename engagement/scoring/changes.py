"""Change detection: whether a workspace needs a refresh, and which users and accounts changed.

A full rescore is needed when the workspace was never scored, its settings changed (the config
digest), the day changed, or the change log (EventActivity) no longer reaches back to the
watermark. Otherwise a refresh reads what changed since the watermark: batches of events
applied, users and accounts updated, memberships created.
"""

# ruff: noqa: S608

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from engagement.backends import database_backend
from engagement.features import workspace_features
from engagement.models import EventWeight, ScoringState, Workspace
from engagement.scoring.ranks import p90_lags
from engagement.scoring.run import ScoringRun, db_datetime
from engagement.stored_json import read_account_filter


def workspace_config_digest(*, workspace: Workspace) -> str:
    """What a full rescore depends on besides the data: a change means rescore everything."""
    weights = sorted(
        EventWeight.objects.filter(workspace=workspace).values_list("event_name", "weight")
    )
    config = {
        "lookback_days": workspace.lookback_days,
        "daily_event_cap": workspace.daily_event_cap,
        "account_filter": read_account_filter(workspace),
        "weights": weights,
    }
    features = workspace_features(workspace_id=workspace.id)
    if features:  # adoption counts features then (left out otherwise: digests stay as they were)
        config["features"] = features
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def watermark_at(now: datetime) -> datetime:
    """What a refresh starting to read changes at `now` may record as scored through: `now`, or
    the start of the oldest transaction still writing, when earlier. That transaction's rows,
    stamped after it began, are not visible to this refresh; the next one reads from before
    them. (Without this, the overlap alone would have to span the longest writing transaction:
    it did, at 30 s, and each refresh under steady load re-scored 30 s of changes.)"""
    oldest = database_backend().oldest_write_started()
    return now if oldest is None else min(now, oldest)


# Every change is stamped once its transaction has written (and so shows in pg_stat_activity:
# users and accounts are locked before the drain takes its time), or in the statement that
# writes it (auto_now): at most a round trip or two before the transaction's first write.
STAMP_LEAD = timedelta(milliseconds=100)


def clock_margin() -> timedelta:
    """What the re-read covers where the watermark already waits for open transactions
    (watermark_at): the clocks of the machines that stamp changes, run the refresh and the
    database, INGESTION_HOSTS_CLOCK_SKEW_MS apart at most, and a stamp's lead on its write.

    It was 2 s: under a steady load each incremental refresh then recomputed the users of the
    last 2 s again, on top of those of the ~1 s since the one before (docs/benchmarks.md)."""
    return timedelta(milliseconds=settings.INGESTION_HOSTS_CLOCK_SKEW_MS) + STAMP_LEAD


def changes_since(state: ScoringState) -> datetime | None:
    """From when a refresh re-reads changes: the watermark less the overlap that catches
    transactions committed late (clock_margin() where the database shows open transactions, at
    most SCORING_WATERMARK_OVERLAP_SECONDS); None for a workspace never scored."""
    if state.scored_through is None:
        return None
    overlap = timedelta(seconds=settings.SCORING_WATERMARK_OVERLAP_SECONDS)
    if database_backend().sees_open_writes:
        overlap = min(overlap, clock_margin())
    return state.scored_through - overlap


def activity_kept_since(since: datetime, now: datetime, *, margin: float = 1.0) -> bool:
    """Whether EventActivity still holds every batch applied after `since` (older rows are
    purged; with a margin below 1, whether it will for a while yet): if not, only a full
    rescore is sure to see every change."""
    keep = timedelta(minutes=settings.SCORING_ACTIVITY_KEEP_MINUTES) * margin
    return since >= now - keep


# What changed since a refresh's watermark, the one definition both the due check and the
# candidate load read: batches of applied events, users and accounts updated (traits, identity,
# first/last seen), and memberships created. `%(product)s` and `%(since)s` are bound parameters.
_APPLIED_BATCHES = (
    "engagement_eventactivity x{elements}"
    " WHERE x.product_id = %(product)s AND x.applied_at > %(since)s"
)
_UPDATED = "engagement_{kind} WHERE product_id = %(product)s AND updated_at > %(since)s"
_LINKED = (
    "engagement_membership m JOIN engagement_user u ON u.id = m.user_id"
    " WHERE m.created_at > %(since)s AND u.product_id = %(product)s"
)


def workspace_refresh_is_due(*, workspace: Workspace, now: datetime | None = None) -> bool:
    """Cheap check (indexed EXISTS queries): would a refresh have anything to do?"""
    now = now or timezone.now()
    state = ScoringState.objects.filter(workspace_id=workspace.id).first()
    if state is None or state.scored_through is None:
        return True
    if state.window_end != now.astimezone(UTC).date():
        return True
    if state.config_digest != workspace_config_digest(workspace=workspace):
        return True
    if p90_lags(state, now):
        return True
    since = changes_since(state)
    assert since is not None  # the workspace was scored (checked above)
    if not activity_kept_since(since, now, margin=0.5):
        return True  # an idle refresh moves the watermark on before the activity it needs goes
    params = {"product": workspace.product_id, "since": db_datetime(since)}
    sources = [
        _APPLIED_BATCHES.format(elements=""),
        _UPDATED.format(kind="user"),
        _UPDATED.format(kind="account"),
        _LINKED,
    ]
    exists = " OR ".join(f"EXISTS (SELECT 1 FROM {source})" for source in sources)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 WHERE {exists}", params)  # noqa: S608 (constants only)
        return cursor.fetchone() is not None


def load_changed(run: ScoringRun, *, since: datetime) -> bool:
    """The users and accounts that changed since `since`, into eds_t_candidate_user and
    eds_t_candidate_account; False when there are none."""
    extra = {"since": db_datetime(since)}
    run.temp("eds_t_candidate_user", "user_id BIGINT PRIMARY KEY")
    run.temp("eds_t_candidate_account", "account_id BIGINT PRIMARY KEY")
    for kind, ids in (("user", "x.user_ids"), ("account", "x.account_ids")):
        run.run(
            f"""
            INSERT INTO eds_t_candidate_{kind} ({kind}_id)
            SELECT CAST(j.value AS BIGINT)
                FROM {_APPLIED_BATCHES.format(elements=", " + run.sql.json_elements(ids))}
            UNION SELECT id FROM {_UPDATED.format(kind=kind)}
            UNION SELECT m.{kind}_id FROM {_LINKED}
            """,
            extra,
        )
    return bool(run.count("eds_t_candidate_user") or run.count("eds_t_candidate_account"))
