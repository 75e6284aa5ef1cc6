"""The periodic tasks celery beat runs (settings.CELERY_BEAT_SCHEDULE), each calling a service."""

_HOURLY = 3600.0
_MINUTELY = 60.0


def beat_schedule(*, sweep_seconds: int, refresh_seconds: int) -> dict[str, dict]:
    """Every periodic task and its period in seconds: the ingestion sweep's and the score
    refresh's from settings (INGESTION_SWEEP_SECONDS, SCORING_REFRESH_SECONDS)."""
    return {
        # The acceptance store is the source of truth; this sweep re-queues whatever a lost
        # broker message left behind (a broker restart or flush, a worker killed mid-task).
        "ingestion-sweep": _every(sweep_seconds, "ingestion.tasks.sweep_accepted_requests"),
        "ingestion-purge-drops": _every(_HOURLY, "ingestion.tasks.purge_old_drops"),
        "ingestion-purge-seen-messages": _every(_HOURLY, "ingestion.tasks.purge_seen_messages"),
        "events-partitions-maintain": _every(_HOURLY, "engagement.tasks.event_partitions_maintain"),
        # The rollups of the days that ended, stored again by account, then user (docs/scoring.md).
        "events-rollups-order": _every(_HOURLY, "engagement.tasks.event_rollups_order"),
        # The overview's events per day: each stored batch appends tallies, folded here.
        "events-tallies-compact": _every(_HOURLY, "engagement.tasks.event_tallies_compact"),
        # Changes queue their own refresh (engagement/scoring/demand.py); this sweep catches
        # what was lost and the workspaces whose day ended, looking only where something changed.
        "scores-refresh-due": _every(refresh_seconds, "engagement.tasks.scores_refresh_due"),
        "scores-purge-event-activity": _every(_MINUTELY, "engagement.tasks.event_activity_purge"),
        "segments-purge-changes": _every(_HOURLY, "engagement.tasks.segment_changes_purge"),
        # Score history: store the day that ended, recompute after a settings change or a
        # backfill.
        "score-history-due": _every(_MINUTELY, "engagement.tasks.score_history_due"),
        # Erasures whose task was lost (a restore under a new broker, a flushed broker) run.
        "erasures-stalled-requeue": _every(
            _MINUTELY * 10, "engagement.tasks.erasures_stalled_requeue_task"
        ),
        # Deliveries whose attempt was lost (a killed worker, a restarted broker) are sent again.
        "automations-deliveries-due": _every(5.0, "automations.tasks.deliveries_due"),
        "automations-trait-syncs-due": _every(_MINUTELY, "automations.tasks.trait_syncs_due"),
        # A marketplace sync whose task died is closed with that error, freeing the connection.
        "marketplace-close-dead-runs": _every(_MINUTELY, "marketplace.tasks.sync_runs_close_dead"),
    }


def _every(seconds: float, task: str) -> dict:
    return {"task": task, "schedule": float(seconds)}
