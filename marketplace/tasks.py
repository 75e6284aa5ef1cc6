"""Celery tasks of the marketplace connection: each loads by id and calls a service.

They run on their own queue, `marketplace` (config/celery.py routes them), served by a worker
of their own, so a sync never delays ingestion or scoring. A task never sleeps: waiting for a
Retry-After or a backoff is a countdown before the next attempt.
"""

from celery import shared_task

from marketplace import services, sync
from marketplace.models import SyncRun


@shared_task(acks_late=True, ignore_result=True)
def sync_run_execute(run_id: int) -> str:
    """Run (or resume) one sync run; a transient failure schedules this task again."""
    step = sync.sync_run_execute(run_id=run_id)
    if step.retry_in is not None:
        sync_run_execute.apply_async(args=(run_id,), countdown=step.retry_in)
    return step.outcome


@shared_task(ignore_result=True, expires=3600)
def connection_sync_scheduled(connection_id: int) -> str:
    """The connection's six-hourly PeriodicTask: licenses updated in the last five days."""
    return services.connection_sync_request(
        connection_id=connection_id, trigger=SyncRun.Trigger.SCHEDULED
    ).message


@shared_task(ignore_result=True, expires=300)
def sync_runs_close_dead() -> int:
    """Every minute: close the runs whose task died, with that error, freeing the connection."""
    return services.sync_runs_close_dead()
