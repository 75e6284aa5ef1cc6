"""Celery tasks of the marketplace connection: each loads by id and calls a service."""

from celery import shared_task

from marketplace import services
from marketplace.models import SyncRun


@shared_task(acks_late=True, ignore_result=True)
def sync_run_execute(run_id: int) -> str:
    """Run (or resume) one sync run; a transient failure schedules this task again."""
    step = services.sync_run_execute(run_id=run_id)
    if step.retry_in is not None:
        sync_run_execute.apply_async(args=[run_id], countdown=step.retry_in)
    return step.outcome


@shared_task(ignore_result=True, expires=3600)
def connection_sync_scheduled(connection_id: int) -> str:
    """The connection's six-hourly PeriodicTask: licenses updated in the last five days."""
    return services.connection_sync_request(
        connection_id=connection_id, trigger=SyncRun.Trigger.SCHEDULED
    ).message
