"""Writes of the marketplace connection: configure, disconnect, schedule, request a sync.

States: not configured -> active (valid details saved; a full sync starts) -> requires
authentication (a 401; the schedule pauses) -> active (all four values saved again; a full sync
starts); active -> disconnected (the schedule stops; imported `am.` traits stay).
Running a sync, page by page, is marketplace/sync.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables
from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

from marketplace import metrics
from marketplace.client import (
    FEEDBACK,
    TRANSACTIONS,
    App,
    MarketplaceClient,
    MarketplaceError,
    MarketplaceForbidden,
    MarketplaceUnauthorized,
)
from marketplace.models import License, MarketplaceConnection, SyncRun

State = MarketplaceConnection.State
Outcome = SyncRun.Outcome

SYNC_INTERVAL_HOURS = 6
LOOKBACK_DAYS = 5
# A worker holds a connection's sync for this long past its latest page; longer than one
# request's deadline (marketplace.client.DEADLINE_SECONDS) plus a commit.
LEASE = timedelta(minutes=5)
# A queued or retrying run whose task has not started this long after it was due lost it.
QUEUE_GRACE = timedelta(minutes=15)
SCHEDULED_TASK = "marketplace.tasks.connection_sync_scheduled"


class ConnectionDetailsError(Exception):
    """Saving the details failed; `field` names the form field at fault, if any."""

    def __init__(self, message: str, *, field: str | None = None, apps: list[App] | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.apps = apps or []


@dataclass(frozen=True, slots=True)
class ResolvedApp:
    developer_id: str
    product_id: str
    app_name: str


@sensitive_variables("api_token")
def connection_details_check(
    *,
    email: str,
    api_token: str,
    vendor_id: str,
    app_key: str = "",
    app_name: str = "",
    product_id: str = "",
) -> ResolvedApp:
    """Look up the developer ID and find the app in the vendor's listing.

    The app is named by exactly one of appKey, appName or productId; the stored value is always
    the listing's productId. Raises ConnectionDetailsError with a message the admin can act on
    (and the vendor's apps, to pick from, when the app is missing or unknown).
    """
    vendor_id = vendor_id.strip()
    if not vendor_id.isdigit():
        raise ConnectionDetailsError(
            "The vendor ID is the number at the end of the vendor management page address.",
            field="vendor_id",
        )
    client = MarketplaceClient(email=email, api_token=api_token)
    try:
        developer_id = client.developer_id(vendor_id)
        apps = list(client.apps(developer_id))
    except MarketplaceError as exc:
        field = "api_token" if isinstance(exc, MarketplaceUnauthorized) else None
        if exc.status_code == 404:
            field = "vendor_id"
        raise ConnectionDetailsError(exc.message, field=field) from exc
    wanted = [value.strip() for value in (app_key, app_name, product_id) if value.strip()]
    if len(wanted) != 1:
        raise ConnectionDetailsError(
            "Pick the app whose licenses to import." if not wanted else "Name the app once.",
            field="app",
            apps=apps,
        )
    needle = wanted[0]
    for app in apps:
        if needle in (app.product_id, app.app_key) or needle.casefold() == app.app_name.casefold():
            return ResolvedApp(
                developer_id=developer_id, product_id=app.product_id, app_name=app.app_name
            )
    raise ConnectionDetailsError(
        f"No app {needle!r} in vendor {vendor_id}'s listing ({len(apps)} apps).",
        field="app",
        apps=apps,
    )


@sensitive_variables("api_token")
def connection_configure(
    *,
    product_id: int,
    email: str,
    api_token: str,
    vendor_id: str,
    developer_id: str,
    marketplace_product_id: str,
    app_name: str = "",
    token_set_on: date | None = None,
) -> MarketplaceConnection:
    """Save valid details (all four values, checked by connection_details_check): the connection
    becomes active and a full sync starts after the transaction commits. The token counts as
    set today unless `token_set_on` says when it was (not in the future)."""
    if token_set_on is not None:
        token_set_on_check(token_set_on)
    now = timezone.now()
    with transaction.atomic():
        stored, _ = MarketplaceConnection.objects.select_for_update().get_or_create(
            product_id=product_id
        )
        if stored.marketplace_product_id and (
            stored.marketplace_product_id != marketplace_product_id
        ):
            # Another app: the licenses of the previous one no longer compete for accounts.
            License.objects.filter(connection=stored).delete()
        stored.email = email.strip()
        stored.api_token = api_token.strip()
        stored.token_set_on = token_set_on or timezone.localdate(now)
        stored.vendor_id = vendor_id.strip()
        stored.developer_id = developer_id
        stored.marketplace_product_id = marketplace_product_id
        stored.app_name = app_name
        stored.api_url = settings.MARKETPLACE_API_URL.rstrip("/")
        stored.state = State.ACTIVE
        stored.state_changed_at = now
        stored.full_sync_completed_at = None
        stored.last_error = ""
        stored.last_error_at = None
        stored.save()
        _runs_close_open(
            stored.id,
            "Superseded: the connection details were saved again.",
            metrics.SUPERSEDED,
        )
        connection_schedule_keep_in_step(stored)
        connection_sync_request(connection_id=stored.id, trigger=SyncRun.Trigger.CONNECTED)
    return stored


class TokenDateError(ValueError):
    """A token_set_on that cannot be: not a YYYY-MM-DD day, or in the future."""


def token_set_on_parse(text: str) -> date:
    """A token day as typed (`YYYY-MM-DD`); TokenDateError says what is wrong."""
    try:
        if len(text.strip()) != 10:
            raise ValueError
        day = date.fromisoformat(text.strip())
    except ValueError:
        raise TokenDateError(
            f"{text!r} is not a day: write the day the token was set as YYYY-MM-DD."
        ) from None
    token_set_on_check(day)
    return day


def token_set_on_check(day: date) -> None:
    today = timezone.localdate()
    if day > today:
        raise TokenDateError(
            f"{day.isoformat()} is in the future (today is {today.isoformat()}): a token "
            "cannot have been set yet."
        )


def connection_token_set_on_update(*, connection_id: int, token_set_on: date) -> None:
    """Record the day the stored token was set (when it was created earlier than saved here),
    without touching the token or anything else."""
    token_set_on_check(token_set_on)
    updated = (
        MarketplaceConnection.objects.filter(id=connection_id)
        .exclude(api_token__isnull=True)
        .exclude(api_token="")
        .update(token_set_on=token_set_on)
    )
    if not updated:
        raise TokenDateError("No API token is stored: save the connection details first.")


def connections_disconnect(*, connection_ids: list[int]) -> int:
    """Stop future syncs and a running one, forget the token; imported `am.` traits stay.

    The connection row is locked, so a worker's page commit either finished before (and counts)
    or sees the connection disconnected and writes nothing (marketplace/sync.py).
    """
    now = timezone.now()
    with transaction.atomic():
        connections = list(
            MarketplaceConnection.objects.select_for_update()
            .filter(id__in=connection_ids)
            .exclude(state=State.DISCONNECTED)
        )
        for connection in connections:
            connection.state = State.DISCONNECTED
            connection.state_changed_at = now
            connection.api_token = ""
            connection.token_set_on = None  # no token, no token age
            _runs_close_open(
                connection.id, "Stopped: the connection was disconnected.", metrics.DISCONNECTED
            )
        MarketplaceConnection.objects.bulk_update(
            connections, ["state", "state_changed_at", "api_token", "token_set_on"]
        )
        PeriodicTask.objects.filter(
            id__in=[c.periodic_task_id for c in connections if c.periodic_task_id]
        ).update(enabled=False)
        # A queryset update bypasses PeriodicTask.save(): tell beat to reload its schedule.
        PeriodicTasks.update_changed()
    return len(connections)


def connection_test(*, connection_id: int) -> str:
    """Try the stored details without changing anything: vendor, listing, license reporting,
    then sales and feedback reporting (a 403 there is reported in the answer).

    Returns what worked; raises the client's typed error for what did not.
    """
    stored = MarketplaceConnection.objects.get(id=connection_id)
    if not stored.api_token:
        raise MarketplaceError("No API token is stored: save the connection details first.")
    client = MarketplaceClient(
        email=stored.email, api_token=stored.api_token, base_url=stored.api_url
    )
    developer_id = client.developer_id(stored.vendor_id)
    if developer_id != stored.developer_id:
        raise MarketplaceError(
            f"Vendor {stored.vendor_id} now has developer ID {developer_id}, not "
            f"{stored.developer_id}: save the connection details again."
        )
    app = next(
        (a for a in client.apps(developer_id) if a.product_id == stored.marketplace_product_id),
        None,
    )
    if app is None:
        raise MarketplaceError(
            f"The app {stored.marketplace_product_id} is no longer in the vendor's listing."
        )
    url = client.licenses_url(developer_id=developer_id, product_id=app.product_id, limit=1)
    page = client.licenses_page(url)
    total = f"{page.total} licenses" if page.total is not None else "licenses reachable"
    # Sales and feedback reporting are permissions of their own: a refusal there is reported,
    # not raised (a sync skips that list and still imports the licenses).
    refused = []
    ids = {"developer_id": developer_id, "product_id": app.product_id}
    for what, list_url, key in (
        ("sales transactions", client.transactions_url(**ids, limit=1), TRANSACTIONS),
        ("uninstall feedback", client.feedback_url(**ids, limit=1), FEEDBACK),
    ):
        try:
            client.report_page(list_url, key)
        except MarketplaceForbidden:
            refused.append(what)
    works = f"Connection works: {app.app_name or app.app_key} ({app.product_id}), {total}"
    if refused:
        return f"{works}; refused (403): {' and '.join(refused)}, whose traits will not update."
    return f"{works}, sales and uninstall feedback reachable."


# --- schedule -------------------------------------------------------------------------------
def _interval() -> IntervalSchedule:
    interval = IntervalSchedule.objects.filter(
        every=SYNC_INTERVAL_HOURS, period=IntervalSchedule.HOURS
    ).first()
    return interval or IntervalSchedule.objects.create(
        every=SYNC_INTERVAL_HOURS, period=IntervalSchedule.HOURS
    )


def connection_schedule_keep_in_step(connection: MarketplaceConnection) -> None:
    """One PeriodicTask per connection, enabled exactly while the connection is active."""
    enabled = connection.state == State.ACTIVE
    task = connection.periodic_task
    if task is None:
        task = PeriodicTask(
            name=f"marketplace sync: connection {connection.id}",
            task=SCHEDULED_TASK,
            args=json.dumps([connection.id]),
            interval=_interval(),
            description=f"Every {SYNC_INTERVAL_HOURS} h: licenses of {connection.product}",
        )
    if task.pk and task.enabled == enabled:
        return
    task.enabled = enabled
    if enabled:
        # Count the interval from now: the sync that starts on saving is the first one.
        task.last_run_at = timezone.now()
    task.save()  # save() marks the schedule changed for beat
    if connection.periodic_task_id != task.id:
        connection.periodic_task = task
        connection.save(update_fields=["periodic_task"])


def connection_schedule_delete(*, periodic_task_id: int | None) -> None:
    if periodic_task_id:
        PeriodicTask.objects.filter(id=periodic_task_id).delete()
        PeriodicTasks.update_changed()


# --- sync requests ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SyncRequest:
    run_id: int | None
    started: bool
    message: str


SYNC_RUN_TASK = "marketplace.tasks.sync_run_execute"


def _enqueue(run_id: int, countdown: float = 0) -> None:
    # By name from Celery's registry: marketplace.tasks imports this module, not the reverse.
    task = current_app.tasks[SYNC_RUN_TASK]
    transaction.on_commit(lambda: task.apply_async(args=(run_id,), countdown=countdown))


def run_dead_reason(run: SyncRun, connection: MarketplaceConnection, now) -> str | None:
    """Why this open run can never finish on its own, or None while it may.

    A run a worker picked up lives while that worker's lease does (renewed on every page). A run
    waiting for its task (queued, or waiting to retry) lives until QUEUE_GRACE after it was due.
    """
    if connection.sync_lease_until and connection.sync_lease_until > now:
        return None
    if run.outcome == Outcome.RUNNING and run.heartbeat_at is not None:
        if run.retry_at is not None and run.retry_at > now:
            return None
        when = timezone.localtime(run.heartbeat_at).strftime("%Y-%m-%d %H:%M:%S %Z")
        return (
            f"The worker running this sync stopped (last sign of life {when}; its lease ran "
            "out). The next sync starts afresh."
        )
    if run.retry_at is not None and run.retry_at < now - QUEUE_GRACE:
        minutes = int(QUEUE_GRACE.total_seconds() // 60)
        return (
            f"The sync's task did not start within {minutes} minutes of being due: is the "
            "marketplace worker running?"
        )
    return None


def _run_close_dead(run: SyncRun, reason: str) -> None:
    """Close a dead run with its reason; the connection shows it as its latest error."""
    now = timezone.now()
    closed = SyncRun.objects.filter(id=run.id, outcome__in=SyncRun.OPEN).update(
        outcome=Outcome.FAILED, error=reason, finished_at=now, retry_at=None
    )
    if closed:
        MarketplaceConnection.objects.filter(id=run.connection_id).update(
            last_error=reason, last_error_at=now
        )
        metrics.sync_run_finished(metrics.ABANDONED)


def sync_runs_close_dead() -> int:
    """Close every open run whose task died (the periodic sweep); returns how many."""
    now = timezone.now()
    closed = 0
    candidates = SyncRun.objects.filter(outcome__in=SyncRun.OPEN, retry_at__lt=now)
    for run_id, connection_id in candidates.values_list("id", "connection_id"):
        with transaction.atomic():
            connection = MarketplaceConnection.objects.select_for_update().get(id=connection_id)
            run = SyncRun.objects.filter(id=run_id, outcome__in=SyncRun.OPEN).first()
            if run is None:
                continue  # closed meanwhile
            reason = run_dead_reason(run, connection, now)
            if reason:
                _run_close_dead(run, reason)
                closed += 1
    return closed


def connection_sync_request(*, connection_id: int, trigger: str) -> SyncRequest:
    """Start a sync unless one is under way (two never run at once).

    Saving details and "Sync now" ask for all licenses; the schedule asks for those updated in
    the last five days, or for all while no full sync has finished yet. An open run whose task
    died is closed with that error first, so it never blocks the connection.
    """
    now = timezone.now()
    with transaction.atomic():
        connection = MarketplaceConnection.objects.select_for_update().get(id=connection_id)
        if connection.state != State.ACTIVE:
            return SyncRequest(
                None,
                False,
                f"The connection is not active ({connection.get_state_display().lower()}).",
            )
        open_run = connection.runs.filter(outcome__in=SyncRun.OPEN).first()
        if open_run is not None:
            reason = run_dead_reason(open_run, connection, now)
            if reason is None:
                return SyncRequest(
                    open_run.id, False, "A sync of this connection is already running."
                )
            _run_close_dead(open_run, reason)
        full = trigger != SyncRun.Trigger.SCHEDULED or connection.full_sync_completed_at is None
        run = SyncRun(
            connection=connection,
            trigger=trigger,
            mode=SyncRun.Mode.FULL if full else SyncRun.Mode.UPDATED,
            last_updated_from=None if full else (now - timedelta(days=LOOKBACK_DAYS)).date(),
            started_at=now,
            retry_at=now,
            stage=SyncRun.FIRST_STAGE,
        )
        if full and trigger == SyncRun.Trigger.SCHEDULED:
            # A full sync that gave up part-way continues where it stopped.
            previous = connection.runs.first()
            if (
                previous is not None
                and previous.mode == SyncRun.Mode.FULL
                and previous.outcome == Outcome.FAILED
                and (previous.next_url or previous.stage != SyncRun.FIRST_STAGE)
            ):
                run.next_url = previous.next_url
                run.stage = previous.stage
                run.note = f"Continues run {previous.id} from where it stopped."
        run.save()
        _enqueue(run.id)
    return SyncRequest(run.id, True, "Sync started.")


def _runs_close_open(connection_id: int, reason: str, counted_as: str) -> None:
    closed = SyncRun.objects.filter(connection_id=connection_id, outcome__in=SyncRun.OPEN).update(
        outcome=Outcome.STOPPED, error=reason, finished_at=timezone.now(), retry_at=None
    )
    metrics.sync_run_finished(counted_as, closed)
