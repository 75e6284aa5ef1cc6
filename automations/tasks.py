"""Celery tasks of automations, on their own queue (`automations`, config/celery.py) served by
a worker of their own: a slow receiver never delays ingestion or scoring."""

from celery import shared_task

from automations import delivery, trait_sync


@shared_task(acks_late=True, ignore_result=True)
def delivery_attempt(delivery_id: str) -> None:
    """One attempt of a delivery; a retry is this task again after the schedule's wait (and the
    sweep sends it should that task be lost)."""
    delay = delivery.delivery_attempt(delivery_id=delivery_id)
    if delay is not None:
        delivery_attempt.apply_async(args=(delivery_id,), countdown=delay)


@shared_task(ignore_result=True, expires=30)
def deliveries_due() -> int:
    """Every 5 seconds: send the deliveries that are due and not in flight."""
    due = delivery.deliveries_due()
    for delivery_id in due:
        delivery_attempt.delay(delivery_id)
    return len(due)


@shared_task(acks_late=True, ignore_result=True)
def trait_sync_run(sync_id: int) -> str:
    """One score sync run; a failed one is retried by the next due check. A sync switched off
    since this was queued does not run."""
    run = trait_sync.trait_sync_run(sync_id=sync_id)
    return run.status if run is not None else "off"


@shared_task(ignore_result=True, expires=60)
def trait_syncs_due() -> int:
    """Every minute: queue the score syncs whose interval has passed."""
    due = trait_sync.trait_syncs_due()
    for sync_id in due:
        trait_sync_run.delay(sync_id)
    return len(due)
