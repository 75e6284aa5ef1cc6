"""Celery tasks load by id and call a service; a transient failure schedules the task again."""

from marketplace import tasks
from marketplace.models import SyncRun
from tests.marketplace.conftest import LICENSES_URL, cloud_license, connect, license_page


def test_sync_task_schedules_itself_again_after_a_transient_failure(acme, mocked, monkeypatch):
    queued = []
    monkeypatch.setattr(
        tasks.sync_run_execute,
        "apply_async",
        lambda args, countdown: queued.append((args, countdown)),
    )
    mocked.get(LICENSES_URL, status=429, headers={"Retry-After": "90"})
    run = SyncRun.objects.get(connection=connect(acme))
    assert tasks.sync_run_execute.run(run.id) == "retrying"
    assert queued == [([run.id], 90.0)]

    mocked.replace("GET", LICENSES_URL, json=license_page([cloud_license("t1")]))
    assert tasks.sync_run_execute.run(run.id) == "succeeded"
    assert len(queued) == 1


def test_scheduled_task_starts_an_updated_licenses_run_after_the_first_full_sync(
    acme, mocked, django_capture_on_commit_callbacks
):
    mocked.get(LICENSES_URL, json=license_page([]))
    connection = connect(acme)
    tasks.sync_run_execute.run(SyncRun.objects.get(connection=connection).id)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        message = tasks.connection_sync_scheduled.run(connection.id)
    assert message == "Sync started." and len(callbacks) == 1
    latest = SyncRun.objects.filter(connection=connection).first()
    assert (latest.trigger, latest.mode) == ("scheduled", "updated")
