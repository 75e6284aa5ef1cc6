"""Celery tasks load by id and call a service; a transient failure schedules the task again."""

from django.core.management import call_command

from marketplace import tasks
from marketplace.fake import FakeMarketplace
from marketplace.models import SyncRun
from tests.marketplace.conftest import (
    EMAIL,
    LICENSES_URL,
    TOKEN,
    VENDOR_ID,
    cloud_license,
    connect,
    license_page,
)


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
    assert queued == [((run.id,), 90.0)]

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


def queued_countdowns(monkeypatch) -> list[float]:
    countdowns: list[float] = []
    monkeypatch.setattr(
        tasks.sync_run_execute,
        "apply_async",
        lambda args, countdown: countdowns.append(countdown),
    )
    return countdowns


def test_a_retry_after_is_waited_as_given_and_without_one_the_backoff_starts_at_2_s(
    acme, mocked, monkeypatch
):
    countdowns = queued_countdowns(monkeypatch)
    mocked.get(LICENSES_URL, status=429, headers={"Retry-After": "1"})
    mocked.get(LICENSES_URL, status=503)
    mocked.get(LICENSES_URL, status=503)
    mocked.get(LICENSES_URL, json=license_page([cloud_license("t1")]))
    run = SyncRun.objects.get(connection=connect(acme))

    outcomes = [tasks.sync_run_execute.run(run.id) for _ in range(4)]

    assert outcomes == ["retrying", "retrying", "retrying", "succeeded"]
    assert countdowns == [1.0, 4.0, 8.0]  # 2 s doubled per failed attempt (the 429 was one)


def test_a_long_retry_after_is_bounded_and_the_backoff_has_a_cap(acme, mocked, monkeypatch):
    countdowns = queued_countdowns(monkeypatch)
    mocked.get(LICENSES_URL, status=429, headers={"Retry-After": "86400"})
    for _ in range(9):
        mocked.get(LICENSES_URL, status=503)
    run = SyncRun.objects.get(connection=connect(acme))

    for _ in range(11):
        tasks.sync_run_execute.run(run.id)

    assert countdowns == [300.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0, 60.0, 60.0]
    run.refresh_from_db()
    assert run.outcome == SyncRun.Outcome.FAILED and "gave up after 10 retries" in run.error


def test_the_readme_recipes_first_sync_with_a_429_and_a_503_waits_5_s_in_all(
    acme, settings, monkeypatch, slept
):
    """500 licenses over HTTP, `inject?status=429&retry_after=1` then `inject?status=503`."""
    countdowns = queued_countdowns(monkeypatch)
    fake = FakeMarketplace(licenses=500, email=EMAIL, token=TOKEN, vendor_id=VENDOR_ID)
    settings.MARKETPLACE_API_URL = fake.start()
    try:
        fake.inject(429, retry_after=1)
        fake.inject(503)
        call_command(
            "marketplace_connect", "--product", str(acme.product.id), "--email", EMAIL,
            "--token", TOKEN, "--vendor-id", VENDOR_ID, "--product-id", fake.product_id,
        )  # fmt: skip
        run = SyncRun.objects.get(connection__product=acme.product)
        while tasks.sync_run_execute.run(run.id) == "retrying":
            pass
    finally:
        fake.stop()

    run.refresh_from_db()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED and run.licenses_seen == 500
    assert countdowns == [1.0, 4.0]
