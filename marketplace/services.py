"""Writes of the marketplace connection: configure, disconnect, schedule, sync.

State machine (spec §3.2): not configured -> active (valid details saved; a full sync starts)
-> requires authentication (a 401; the schedule pauses) -> active (all four values saved again;
a full sync starts); active -> disconnected (the schedule stops; imported `am.` traits stay).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

from engagement.services import account_prefixed_traits_replace
from marketplace import mapping
from marketplace.client import (
    App,
    MarketplaceClient,
    MarketplaceError,
    MarketplaceUnauthorized,
)
from marketplace.models import License, MarketplaceConnection, SyncRun

State = MarketplaceConnection.State
Outcome = SyncRun.Outcome

SYNC_INTERVAL_HOURS = 6
LOOKBACK_DAYS = 5
LEASE = timedelta(minutes=10)
RENEW_EVERY_SECONDS = 30.0
BUSY_RETRY_SECONDS = 30.0
# A run nobody holds the lease for and that was due this long ago lost its task: resume it.
STALE_AFTER = timedelta(minutes=15)
TASK_RETRIES = 6  # task-level retries of a run after the client's own retries gave up
TASK_BACKOFF_BASE = 60.0
TASK_BACKOFF_MAX = 1800.0  # below the Redis broker's default visibility timeout (1 h)
MAX_PAGES = 20_000  # one million licenses: bounds a run whose links never end
PAGES_PER_COMMIT = 4
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
    client = MarketplaceClient(email=email, api_token=api_token, retries=1)
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


def connection_configure(
    *,
    product_id: int,
    email: str,
    api_token: str,
    vendor_id: str,
    developer_id: str,
    marketplace_product_id: str,
    app_name: str = "",
) -> MarketplaceConnection:
    """Save valid details (all four values, checked by connection_details_check): the connection
    becomes active and a full sync starts after the transaction commits."""
    now = timezone.now()
    with transaction.atomic():
        connection, _ = MarketplaceConnection.objects.select_for_update().get_or_create(
            product_id=product_id
        )
        if connection.marketplace_product_id and (
            connection.marketplace_product_id != marketplace_product_id
        ):
            # Another app: the licenses of the previous one no longer compete for accounts.
            License.objects.filter(connection=connection).delete()
        connection.email = email.strip()
        connection.api_token = api_token.strip()
        connection.vendor_id = vendor_id.strip()
        connection.developer_id = developer_id
        connection.marketplace_product_id = marketplace_product_id
        connection.app_name = app_name
        connection.state = State.ACTIVE
        connection.state_changed_at = now
        connection.full_sync_completed_at = None
        connection.last_error = ""
        connection.last_error_at = None
        connection.save()
        _runs_close_open(connection.id, "Superseded: the connection details were saved again.")
        _schedule_keep_in_step(connection)
        connection_sync_request(connection_id=connection.id, trigger=SyncRun.Trigger.CONNECTED)
    return connection


def connections_disconnect(*, connection_ids: list[int]) -> int:
    """Stop future syncs and forget the token; imported `am.` traits stay on the accounts."""
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
            _runs_close_open(connection.id, "Stopped: the connection was disconnected.")
        MarketplaceConnection.objects.bulk_update(
            connections, ["state", "state_changed_at", "api_token"]
        )
        PeriodicTask.objects.filter(
            id__in=[c.periodic_task_id for c in connections if c.periodic_task_id]
        ).update(enabled=False)
        # A queryset update bypasses PeriodicTask.save(): tell beat to reload its schedule.
        PeriodicTasks.update_changed()
    return len(connections)


def connection_test(*, connection_id: int) -> str:
    """Try the stored details without changing anything: vendor, listing, license reporting.

    Returns what worked; raises the client's typed error for what did not.
    """
    connection = MarketplaceConnection.objects.get(id=connection_id)
    if not connection.api_token:
        raise MarketplaceError("No API token is stored: save the connection details first.")
    client = MarketplaceClient(email=connection.email, api_token=connection.api_token, retries=0)
    developer_id = client.developer_id(connection.vendor_id)
    if developer_id != connection.developer_id:
        raise MarketplaceError(
            f"Vendor {connection.vendor_id} now has developer ID {developer_id}, not "
            f"{connection.developer_id}: save the connection details again."
        )
    app = next(
        (a for a in client.apps(developer_id) if a.product_id == connection.marketplace_product_id),
        None,
    )
    if app is None:
        raise MarketplaceError(
            f"The app {connection.marketplace_product_id} is no longer in the vendor's listing."
        )
    url = client.licenses_url(developer_id=developer_id, product_id=app.product_id).replace(
        "limit=50", "limit=1"
    )
    page = client.licenses_page(url)
    total = f"{page.total} licenses" if page.total is not None else "licenses reachable"
    return f"Connection works: {app.app_name or app.app_key} ({app.product_id}), {total}."


# --- schedule -------------------------------------------------------------------------------
def _interval() -> IntervalSchedule:
    interval = IntervalSchedule.objects.filter(
        every=SYNC_INTERVAL_HOURS, period=IntervalSchedule.HOURS
    ).first()
    return interval or IntervalSchedule.objects.create(
        every=SYNC_INTERVAL_HOURS, period=IntervalSchedule.HOURS
    )


def _schedule_keep_in_step(connection: MarketplaceConnection) -> None:
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


# --- sync -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SyncRequest:
    run_id: int | None
    started: bool
    message: str


def _enqueue(run_id: int, countdown: float = 0) -> None:
    from marketplace.tasks import sync_run_execute  # tasks import this module

    transaction.on_commit(lambda: sync_run_execute.apply_async(args=[run_id], countdown=countdown))


def _run_is_alive(run: SyncRun, connection: MarketplaceConnection, now) -> bool:
    if connection.sync_lease_until and connection.sync_lease_until > now:
        return True
    return run.retry_at is not None and run.retry_at > now - STALE_AFTER


def connection_sync_request(*, connection_id: int, trigger: str) -> SyncRequest:
    """Start a sync unless one is under way (two never run at once); resume a stalled one.

    Saving details and "Sync now" ask for all licenses; the schedule asks for those updated in
    the last five days, or for all while no full sync has finished yet.
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
            if _run_is_alive(open_run, connection, now):
                return SyncRequest(
                    open_run.id, False, "A sync of this connection is already running."
                )
            open_run.retry_at = now
            open_run.save(update_fields=["retry_at"])
            _enqueue(open_run.id)
            return SyncRequest(open_run.id, True, "Resumed the sync that had stalled.")
        full = trigger != SyncRun.Trigger.SCHEDULED or connection.full_sync_completed_at is None
        run = SyncRun(
            connection=connection,
            trigger=trigger,
            mode=SyncRun.Mode.FULL if full else SyncRun.Mode.UPDATED,
            last_updated_from=None if full else (now - timedelta(days=LOOKBACK_DAYS)).date(),
            started_at=now,
            retry_at=now,
        )
        if full and trigger == SyncRun.Trigger.SCHEDULED:
            # A full sync that gave up part-way continues where it stopped.
            previous = connection.runs.first()
            if (
                previous is not None
                and previous.mode == SyncRun.Mode.FULL
                and previous.outcome == Outcome.FAILED
                and previous.next_url
            ):
                run.next_url = previous.next_url
                run.error = f"Continues run {previous.id} from where it stopped."
        run.save()
        _enqueue(run.id)
    return SyncRequest(run.id, True, "Sync started.")


def _runs_close_open(connection_id: int, reason: str) -> None:
    SyncRun.objects.filter(connection_id=connection_id, outcome__in=SyncRun.OPEN).update(
        outcome=Outcome.STOPPED, error=reason, finished_at=timezone.now(), retry_at=None
    )


def _lease_acquire(connection_id: int, owner: str) -> bool:
    now = timezone.now()
    return bool(
        MarketplaceConnection.objects.filter(id=connection_id, state=State.ACTIVE)
        .filter(Q(sync_lease_until__isnull=True) | Q(sync_lease_until__lt=now))
        .update(sync_lease_until=now + LEASE, sync_lease_owner=owner)
    )


def _lease_renew(connection_id: int, owner: str) -> bool:
    """False when the lease was lost or the connection left the active state meanwhile."""
    return bool(
        MarketplaceConnection.objects.filter(
            id=connection_id, sync_lease_owner=owner, state=State.ACTIVE
        ).update(sync_lease_until=timezone.now() + LEASE)
    )


def _lease_release(connection_id: int, owner: str) -> None:
    MarketplaceConnection.objects.filter(id=connection_id, sync_lease_owner=owner).update(
        sync_lease_until=None, sync_lease_owner=""
    )


@dataclass(slots=True)
class PageResult:
    licenses: int = 0
    matched: int = 0
    created: int = 0
    skipped: int = 0


def _page_apply(
    connection: MarketplaceConnection, run: SyncRun, licenses: list[dict]
) -> PageResult:
    """Mirror the page's licenses, pick each cloudId's winner, write its `am.` traits.

    A handful of bulk queries per page, none per license.
    """
    result = PageResult(licenses=len(licenses))
    incoming: dict[str, License] = {}
    for record in licenses:
        cloud_id = mapping.cloud_id(record)
        if cloud_id is None:
            result.skipped += 1
            continue
        ref = mapping.license_ref(record)
        rank = mapping.license_rank(record, ref)
        incoming[ref] = License(
            connection=connection,
            cloud_id=cloud_id,
            ref=ref,
            active=rank.active,
            maintenance_end=rank.maintenance_end[:10],
            last_updated=rank.last_updated[:10],
            traits=mapping.license_traits(record),
            last_run=run,
        )
    if not incoming:
        return result
    cloud_ids = {row.cloud_id for row in incoming.values()}
    candidates: dict[str, dict[str, License]] = {cid: {} for cid in cloud_ids}
    seen_in_run: set[str] = set()
    for row in License.objects.filter(connection=connection, cloud_id__in=cloud_ids):
        candidates[row.cloud_id][row.ref] = row
        if row.last_run_id == run.id:
            seen_in_run.add(row.cloud_id)
    for row in incoming.values():
        for others in candidates.values():
            others.pop(row.ref, None)  # a license that moved to another cloudId
        candidates[row.cloud_id][row.ref] = row

    def rank(row: License) -> mapping.Rank:
        return mapping.Rank(row.active, row.maintenance_end, row.last_updated, row.ref)

    winners = {cid: max(rows.values(), key=rank).traits for cid, rows in candidates.items()}
    License.objects.bulk_create(
        list(incoming.values()),
        update_conflicts=True,
        unique_fields=["connection", "ref"],
        update_fields=[
            "cloud_id",
            "active",
            "maintenance_end",
            "last_updated",
            "traits",
            "last_run",
        ],
    )
    written = account_prefixed_traits_replace(
        product_id=connection.product_id, traits_by_tracking_id=winners, prefix=mapping.PREFIX
    )
    # An account met on an earlier page of this run was counted there.
    result.matched = written.matched - len(seen_in_run)
    result.created = written.created
    return result


@dataclass(frozen=True, slots=True)
class RunStep:
    outcome: str
    retry_in: float | None = None


def _connection_error(connection_id: int, message: str, **changes) -> None:
    MarketplaceConnection.objects.filter(id=connection_id).update(
        last_error=message, last_error_at=timezone.now(), **changes
    )


def _run_finish(run: SyncRun, outcome: str, error: str = "") -> RunStep:
    """Close the run, unless someone closed it meanwhile (details saved again, disconnect)."""
    changes = {"outcome": outcome, "finished_at": timezone.now(), "retry_at": None}
    if error:
        changes["error"] = error
    closed = SyncRun.objects.filter(id=run.id, outcome__in=SyncRun.OPEN).update(**changes)
    for name, value in changes.items():
        setattr(run, name, value)
    return RunStep(outcome=outcome if closed else Outcome.STOPPED)


def sync_run_execute(*, run_id: int) -> RunStep:
    """Fetch and apply pages from where the run stopped until the last page or an error.

    Every page commits with the run's counters and next URL, so a retry (or a new worker after a
    crash) resumes at the first page not yet applied. Transient errors the client gave up on
    schedule a retry with exponential backoff honouring Retry-After; 401 pauses the connection;
    403, 404 and other 4xx stop the run with what to check.
    """
    run = SyncRun.objects.select_related("connection").get(id=run_id)
    if run.outcome not in SyncRun.OPEN:
        return RunStep(outcome=run.outcome)
    owner = uuid.uuid4().hex
    if not _lease_acquire(run.connection_id, owner):
        connection = MarketplaceConnection.objects.get(id=run.connection_id)
        if connection.state != State.ACTIVE:
            return _run_finish(
                run,
                Outcome.STOPPED,
                f"The connection is not active ({connection.get_state_display().lower()}).",
            )
        # Another worker holds this connection's sync (a previous run still finishing, or a
        # duplicate delivery): look again shortly; the run stays open until it gets its turn.
        return RunStep(outcome="busy", retry_in=BUSY_RETRY_SECONDS)
    try:
        return _run_pages(run, owner)
    finally:
        _lease_release(run.connection_id, owner)


def _batch_commit(
    connection: MarketplaceConnection,
    run: SyncRun,
    licenses: list[dict],
    *,
    pages: int,
    next_url: str | None,
) -> None:
    with transaction.atomic():
        applied = _page_apply(connection, run, licenses)
        run.pages += pages
        run.licenses_seen += applied.licenses
        run.accounts_matched += applied.matched
        run.accounts_created += applied.created
        run.skipped_without_cloud_id += applied.skipped
        run.next_url = next_url or ""
        run.attempts = 0
        run.retry_at = timezone.now() + LEASE
        run.save(
            update_fields=[
                "pages", "licenses_seen", "accounts_matched", "accounts_created",
                "skipped_without_cloud_id", "next_url", "attempts", "retry_at",
            ]
        )  # fmt: skip


def _run_pages(run: SyncRun, owner: str) -> RunStep:
    connection = MarketplaceConnection.objects.get(id=run.connection_id)
    run.connection = connection
    client = MarketplaceClient(email=connection.email, api_token=connection.api_token or "")
    url = run.next_url or client.licenses_url(
        developer_id=connection.developer_id,
        product_id=connection.marketplace_product_id,
        last_updated=run.last_updated_from.isoformat() if run.last_updated_from else None,
    )
    run.outcome = Outcome.RUNNING
    run.retry_at = timezone.now() + LEASE
    run.save(update_fields=["outcome", "retry_at"])
    visited: set[str] = set()
    renewed = time.monotonic()
    try:
        while url:
            # Fetch a few pages, then apply them in one transaction with the URL to continue
            # from: fewer round trips, and a failure part-way still keeps what was fetched.
            batch: list[dict] = []
            pages, failure = 0, None
            while url and pages < PAGES_PER_COMMIT:
                if url in visited or len(visited) >= MAX_PAGES:
                    return _run_finish(
                        run, Outcome.FAILED, f"The marketplace's pages do not end (at {url})."
                    )
                try:
                    page = client.licenses_page(url)
                except MarketplaceError as exc:
                    failure = exc
                    break
                visited.add(url)
                batch.extend(page.licenses)
                pages += 1
                url = page.next_url
            if pages:
                _batch_commit(connection, run, batch, pages=pages, next_url=url)
            if failure is not None:
                raise failure
            if url and time.monotonic() - renewed > RENEW_EVERY_SECONDS:
                # Also how a closed run (details saved again, disconnect) stops within a minute.
                still_open = SyncRun.objects.filter(id=run.id, outcome__in=SyncRun.OPEN).exists()
                if not (still_open and _lease_renew(connection.id, owner)):
                    return _run_finish(
                        run, Outcome.STOPPED, "Stopped: the connection left the active state."
                    )
                renewed = time.monotonic()
    except MarketplaceUnauthorized as exc:
        if not SyncRun.objects.filter(id=run.id, outcome__in=SyncRun.OPEN).exists():
            return RunStep(outcome=Outcome.STOPPED)  # superseded: the old token's 401 is moot
        with transaction.atomic():
            _connection_error(
                connection.id,
                exc.message,
                state=State.REQUIRES_AUTHENTICATION,
                state_changed_at=timezone.now(),
            )
            connection.state = State.REQUIRES_AUTHENTICATION
            _schedule_keep_in_step(connection)
            return _run_finish(run, Outcome.UNAUTHORIZED, exc.message)
    except MarketplaceError as exc:
        if exc.transient and run.attempts < TASK_RETRIES:
            retry_after = getattr(exc, "retry_after", None) or 0.0
            delay = min(max(TASK_BACKOFF_BASE * 2**run.attempts, retry_after), TASK_BACKOFF_MAX)
            run.attempts += 1
            run.outcome = Outcome.RETRYING
            run.error = f"{exc.message}; retry {run.attempts} of {TASK_RETRIES} in {delay:.0f} s"
            run.retry_at = timezone.now() + timedelta(seconds=delay)
            SyncRun.objects.filter(id=run.id, outcome__in=SyncRun.OPEN).update(
                attempts=run.attempts, outcome=run.outcome, error=run.error, retry_at=run.retry_at
            )
            _connection_error(connection.id, exc.message)
            return RunStep(outcome=Outcome.RETRYING, retry_in=delay)
        _connection_error(connection.id, exc.message)
        outcome = Outcome.FAILED if exc.transient else Outcome.STOPPED
        return _run_finish(run, outcome, exc.message)
    now = timezone.now()
    with transaction.atomic():
        changes = {"last_success_at": now}
        if run.mode == SyncRun.Mode.FULL:
            changes["full_sync_completed_at"] = now
        MarketplaceConnection.objects.filter(id=connection.id).update(**changes)
        return _run_finish(run, Outcome.SUCCEEDED)
