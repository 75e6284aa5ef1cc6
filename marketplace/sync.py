"""Running one sync: fetch pages from where the run stopped, apply them, close the run.

A run goes through stages, in order: the sales transactions and the uninstall feedback (kept),
the licenses (mirrored; their accounts' traits, license and revenue, written at once), then the
traits of the licensed accounts the licenses did not bring in this run, computed again from
everything kept and written where they changed. `SyncRun.stage` and `next_url` say where a retry
continues.

The other half of the marketplace services (services.py requests syncs; this runs them). One
worker at a time holds a connection's lease, renewed before every request; a request that finds
the lease lost or the connection no longer active stops the run before asking the marketplace
again. Every commit locks the connection row and checks again, so nothing is written after a
disconnect (connections_disconnect locks the same row). A license the mapping refuses is skipped
and counted with its reason; the rest of the page and the run go on. Nothing here waits: a
transient failure returns the delay after which the task should run again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, timedelta
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from engagement.services import PrefixedTraitsResult, account_prefixed_traits_replace
from marketplace import client as client_module
from marketplace import mapping, metrics, revenue
from marketplace.client import (
    MarketplaceBadAnswer,
    MarketplaceClient,
    MarketplaceError,
    MarketplaceForbidden,
    MarketplaceUnauthorized,
)
from marketplace.models import License, MarketplaceConnection, SyncRun, Transaction, Uninstall
from marketplace.services import LEASE, connection_schedule_keep_in_step

logger = logging.getLogger(__name__)

State = MarketplaceConnection.State
Outcome = SyncRun.Outcome
Stage = SyncRun.Stage

BUSY_RETRY_SECONDS = 30.0
TASK_RETRIES = 10  # consecutive failed attempts at one page before the run fails (~6 min)
TASK_BACKOFF_BASE = 2.0  # without a Retry-After: 2, 4, 8, 16, 32, then 60 s each time
TASK_BACKOFF_MAX = 60.0
RETRY_AFTER_MAX = 300.0  # a longer Retry-After is waited this long (one retry in TASK_RETRIES)
MAX_PAGES = 20_000  # one million licenses: bounds a run whose links never end
PAGES_PER_COMMIT = 4
SKIPPED_LIST = "Skipped the"  # how a run's note names a list the marketplace refused (403)
TRAITS_PER_COMMIT = 500  # accounts written again per transaction in the run's last stage
MAX_REASONS = 100  # skip reasons kept on a run; the count covers them all


@dataclass(frozen=True, slots=True)
class RunStep:
    outcome: str
    retry_in: float | None = None


def task_backoff_seconds(attempt: int, retry_after: float | None) -> float:
    """The wait before the next task attempt: the marketplace's Retry-After as given (at most
    RETRY_AFTER_MAX), else TASK_BACKOFF_BASE doubled per attempt up to TASK_BACKOFF_MAX."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), RETRY_AFTER_MAX)
    return min(TASK_BACKOFF_BASE * 2 ** min(attempt, 32), TASK_BACKOFF_MAX)


# --- the lease --------------------------------------------------------------------------------
def lease_acquire(connection_id: int, owner: str) -> bool:
    now = timezone.now()
    return bool(
        MarketplaceConnection.objects.filter(id=connection_id, state=State.ACTIVE)
        .filter(Q(sync_lease_until__isnull=True) | Q(sync_lease_until__lt=now))
        .update(sync_lease_until=now + LEASE, sync_lease_owner=owner)
    )


def lease_release(connection_id: int, owner: str) -> None:
    MarketplaceConnection.objects.filter(id=connection_id, sync_lease_owner=owner).update(
        sync_lease_until=None, sync_lease_owner=""
    )


def _heartbeat(run: SyncRun, owner: str, **changes) -> bool:
    """Renew the lease before a request; False when the run is no longer this worker's to go
    on with (the connection left the active state, the run was closed, the lease was lost)."""
    now = timezone.now()
    until = now + LEASE
    renewed = MarketplaceConnection.objects.filter(
        id=run.connection_id, sync_lease_owner=owner, state=State.ACTIVE
    ).update(sync_lease_until=until)
    if not renewed:
        return False
    return bool(
        SyncRun.objects.filter(id=run.id, outcome__in=SyncRun.OPEN).update(
            heartbeat_at=now, retry_at=until, **changes
        )
    )


def _still_ours(run: SyncRun, owner: str) -> bool:
    """Inside a transaction: lock the connection row; True while this worker may write."""
    locked = (
        MarketplaceConnection.objects.select_for_update()
        .filter(id=run.connection_id, state=State.ACTIVE, sync_lease_owner=owner)
        .values_list("id", flat=True)
        .first()
    )
    return (
        locked is not None and SyncRun.objects.filter(id=run.id, outcome__in=SyncRun.OPEN).exists()
    )


# --- applying pages ---------------------------------------------------------------------------
@dataclass(slots=True)
class PageResult:
    licenses: int = 0
    matched: int = 0
    created: int = 0
    skipped: int = 0
    updated: int = 0  # accounts whose traits changed
    transactions: int = 0
    transactions_skipped: int = 0
    feedback: int = 0
    rejected: list[dict] = field(default_factory=list)


def _today() -> date:
    return timezone.now().astimezone(UTC).date()


def _licenses_mapped(
    connection: MarketplaceConnection, run: SyncRun, records: list, result: PageResult
) -> dict[str, License]:
    """The page's licenses as rows to mirror, by ref; rejected and cloudId-less ones are
    counted in `result`."""
    incoming: dict[str, License] = {}
    for record in records:
        try:
            mapped = mapping.license_map(record)
        except mapping.LicenseRejected as exc:
            result.rejected.append(
                {"license": mapping.license_label(record), "field": exc.field, "reason": exc.reason}
            )
            continue
        if mapped.cloud_id is None:
            result.skipped += 1
            continue
        incoming[mapped.ref] = License(
            connection=connection,
            cloud_id=mapped.cloud_id,
            ref=mapped.ref,
            active=mapped.rank.active,
            maintenance_end=mapped.rank.maintenance_end,
            last_updated=mapped.rank.last_updated,
            traits=mapped.traits,
            last_run=run,
        )
    return incoming


def _rank(row: License) -> mapping.Rank:
    return mapping.Rank(row.active, row.maintenance_end, row.last_updated, row.ref)


def _accounts_traits_write(
    connection: MarketplaceConnection, cloud_ids: set[str], *, create_missing: bool
) -> PrefixedTraitsResult:
    """Write the `am.` traits of these accounts: their winning license's, and the revenue traits
    from their kept transactions and uninstalls. An account whose traits are already these is
    not written (engagement's account_prefixed_traits_replace compares)."""
    by_cloud: dict[str, list[License]] = {}
    for row in License.objects.filter(connection=connection, cloud_id__in=cloud_ids):
        by_cloud.setdefault(row.cloud_id, []).append(row)
    winners = {cid: max(rows, key=_rank).traits for cid, rows in by_cloud.items()}
    sales: dict[str, list[Transaction]] = {}
    for sale in Transaction.objects.filter(connection=connection, cloud_id__in=cloud_ids):
        sales.setdefault(sale.cloud_id, []).append(sale)
    # Uninstalls name the site by cloudId, or only the license (then found by its entitlement).
    entitlements: dict[str, str] = {}
    for cid, rows in by_cloud.items():
        for row in rows:
            for name in ("am.appEntitlementId", "am.appEntitlementNumber"):
                if isinstance(row.traits.get(name), str):
                    entitlements[row.traits[name]] = cid
    uninstalls: dict[str, list[Uninstall]] = {}
    for gone in Uninstall.objects.filter(connection=connection).filter(
        Q(cloud_id__in=cloud_ids) | Q(cloud_id="", entitlement__in=list(entitlements))
    ):
        site = gone.cloud_id or entitlements.get(gone.entitlement)
        if site:
            uninstalls.setdefault(site, []).append(gone)
    today = _today()
    traits_by_cloud = {
        cid: {
            **traits,
            **revenue.revenue_traits(
                license_traits=traits,
                sales=sales.get(cid, []),
                uninstalls=uninstalls.get(cid, []),
                today=today,
            ),
        }
        for cid, traits in winners.items()
    }
    return account_prefixed_traits_replace(
        product_id=connection.product_id,
        traits_by_tracking_id=traits_by_cloud,
        prefix=mapping.PREFIX,
        # An account known only from its license is named by the license's company.
        fallback_names={
            cid: traits[mapping.COMPANY_TRAIT]
            for cid, traits in winners.items()
            if isinstance(traits.get(mapping.COMPANY_TRAIT), str)
        },
        create_missing=create_missing,
    )


def _licenses_apply(connection: MarketplaceConnection, run: SyncRun, records: list) -> PageResult:
    """Mirror the licenses, then write the `am.` traits of their accounts (each cloudId's winning
    license, whatever order its licenses arrived in, and its revenue traits).

    A handful of bulk queries per commit, none per license.
    """
    result = PageResult(licenses=len(records))
    incoming = _licenses_mapped(connection, run, records, result)
    if not incoming:
        return result
    cloud_ids = {row.cloud_id for row in incoming.values()}
    seen_in_run = set(
        License.objects.filter(
            connection=connection, cloud_id__in=cloud_ids, last_run=run
        ).values_list("cloud_id", flat=True)
    )
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
    written = _accounts_traits_write(connection, cloud_ids, create_missing=True)
    # An account met on an earlier page of this run was counted there.
    result.matched = written.matched - len(seen_in_run)
    result.created = written.created
    result.updated = written.changed
    return result


def _transactions_apply(
    connection: MarketplaceConnection, run: SyncRun, records: list
) -> PageResult:
    """Keep the page's transaction lines of the connected app that name a site (cloudId); the
    account traits follow with the licenses and in the run's last stage."""
    result = PageResult(transactions=len(records))
    incoming: dict[tuple[str, str], Transaction] = {}
    for record in records:
        try:
            sale = revenue.transaction_map(record)
        except mapping.LicenseRejected as exc:
            result.rejected.append(
                {
                    "license": revenue.transaction_label(record),
                    "field": exc.field,
                    "reason": exc.reason,
                }
            )
            continue
        other_app = sale.product_id is not None and (
            sale.product_id != connection.marketplace_product_id
        )
        if sale.cloud_id is None or other_app:
            result.transactions_skipped += 1
            continue
        incoming[(sale.transaction_id, sale.line_item_id)] = Transaction(
            connection=connection,
            transaction_id=sale.transaction_id,
            line_item_id=sale.line_item_id,
            cloud_id=sale.cloud_id,
            entitlement=sale.entitlement,
            sale_date=sale.sale_date,
            sale_type=sale.sale_type,
            billing_period=sale.billing_period,
            license_type=sale.license_type,
            vendor_amount=sale.vendor_amount,
            maintenance_start=sale.maintenance_start,
            maintenance_end=sale.maintenance_end,
            last_updated=sale.last_updated,
            last_run=run,
        )
    if incoming:
        Transaction.objects.bulk_create(
            list(incoming.values()),
            update_conflicts=True,
            unique_fields=["connection", "transaction_id", "line_item_id"],
            update_fields=[
                "cloud_id", "entitlement", "sale_date", "sale_type", "billing_period",
                "license_type", "vendor_amount", "maintenance_start", "maintenance_end",
                "last_updated", "last_run",
            ],
        )  # fmt: skip
    return result


def _feedback_apply(connection: MarketplaceConnection, run: SyncRun, records: list) -> PageResult:
    """Keep the page's uninstall feedback of the connected app (its day and reasonKey only)."""
    result = PageResult(feedback=len(records))
    incoming: dict[str, Uninstall] = {}
    for record in records:
        try:
            feedback = revenue.feedback_map(record)
        except mapping.LicenseRejected as exc:
            label = revenue.feedback_label(record)
            result.rejected.append({"license": label, "field": exc.field, "reason": exc.reason})
            continue
        other_app = feedback.product_id is not None and (
            feedback.product_id != connection.marketplace_product_id
        )
        if feedback.feedback_type != revenue.UNINSTALL or other_app:
            continue  # a disable (the API was asked for uninstalls only) or another app's
        if not feedback.cloud_id and not feedback.entitlement:
            continue  # a server or data-center uninstall: no account to tell
        incoming[feedback.key] = Uninstall(
            connection=connection,
            key=feedback.key,
            cloud_id=feedback.cloud_id,
            entitlement=feedback.entitlement,
            feedback_date=feedback.feedback_date,
            reason_key=feedback.reason_key,
            last_run=run,
        )
    if incoming:
        Uninstall.objects.bulk_create(
            list(incoming.values()),
            update_conflicts=True,
            unique_fields=["connection", "key"],
            update_fields=["cloud_id", "entitlement", "feedback_date", "reason_key", "last_run"],
        )
    return result


# Keyed by the stage as SyncRun.stage holds it (text; a Stage is its text).
_APPLY: dict[str, Callable[[MarketplaceConnection, SyncRun, list], PageResult]] = {
    Stage.LICENSES: _licenses_apply,
    Stage.TRANSACTIONS: _transactions_apply,
    Stage.FEEDBACK: _feedback_apply,
}
# Transactions and feedback first: a license's account is then written once, with its revenue.
_NEXT_STAGE: dict[str, str] = {
    Stage.TRANSACTIONS: Stage.FEEDBACK,
    Stage.FEEDBACK: Stage.LICENSES,
    Stage.LICENSES: Stage.TRAITS,
}
# A 403 on these skips the list (its own reporting permission); on the licenses it stops the run.
_OPTIONAL_STAGES = (Stage.TRANSACTIONS, Stage.FEEDBACK)
_RECORDS_KEY: dict[str, str] = {
    Stage.LICENSES: client_module.LICENSES,
    Stage.TRANSACTIONS: client_module.TRANSACTIONS,
    Stage.FEEDBACK: client_module.FEEDBACK,
}


def _batch_commit(
    connection: MarketplaceConnection,
    run: SyncRun,
    owner: str,
    records: list,
    *,
    pages: int,
    next_url: str | None,
) -> bool:
    """Apply fetched pages of the run's stage with the run's counters and where to continue
    (the next stage when this one's last page is among them); False (and nothing written)
    when the run is no longer this worker's."""
    with transaction.atomic():
        if not _still_ours(run, owner):
            return False
        applied = _APPLY[run.stage](connection, run, records)
        if run.stage == Stage.LICENSES:
            run.pages += pages  # license pages; the other lists count their records
        run.licenses_seen += applied.licenses
        run.accounts_matched += applied.matched
        run.accounts_created += applied.created
        run.accounts_updated += applied.updated
        run.skipped_without_cloud_id += applied.skipped
        run.transactions_seen += applied.transactions
        run.transactions_skipped += applied.transactions_skipped
        run.feedback_seen += applied.feedback
        run.skipped_invalid += len(applied.rejected)
        room = MAX_REASONS - len(run.skipped_reasons)
        run.skipped_reasons = run.skipped_reasons + applied.rejected[: max(room, 0)]
        run.next_url = next_url or ""
        if not next_url:
            run.stage = _NEXT_STAGE[run.stage]
        run.attempts = 0
        run.save(
            update_fields=[
                "pages", "licenses_seen", "accounts_matched", "accounts_created",
                "accounts_updated", "skipped_without_cloud_id", "transactions_seen",
                "transactions_skipped", "feedback_seen", "skipped_invalid", "skipped_reasons",
                "next_url", "stage", "attempts",
            ]
        )  # fmt: skip
    return True


def _traits_stage(run: SyncRun, connection: MarketplaceConnection, owner: str) -> bool:
    """The run's last stage: the licensed accounts whose licenses this run did not bring (the
    licenses stage wrote those, with everything kept before it) are computed again from what is
    kept (a refund or an uninstall changes an account whose license did not; the 12 months move
    with the days) and written where they changed; never creates an account. False when the
    run is no longer this worker's."""
    licensed = License.objects.filter(connection=connection)
    done = set(licensed.filter(last_run=run).values_list("cloud_id", flat=True))
    cloud_ids = sorted(set(licensed.values_list("cloud_id", flat=True)) - done)
    for at in range(0, len(cloud_ids), TRAITS_PER_COMMIT):
        if at and not _heartbeat(run, owner):
            return False
        with transaction.atomic():
            if not _still_ours(run, owner):
                return False
            chunk = set(cloud_ids[at : at + TRAITS_PER_COMMIT])
            written = _accounts_traits_write(connection, chunk, create_missing=False)
            run.accounts_updated += written.changed
            run.save(update_fields=["accounts_updated"])
    return True


# --- closing a run ----------------------------------------------------------------------------
def run_finish(run: SyncRun, outcome: str, error: str = "") -> RunStep:
    """Close the run with what happened in it, unless someone closed it meanwhile (details saved
    again, disconnect, the dead-run sweep)."""
    changes = {"outcome": outcome, "finished_at": timezone.now(), "retry_at": None, "error": error}
    closed = SyncRun.objects.filter(id=run.id, outcome__in=SyncRun.OPEN).update(**changes)
    for name, value in changes.items():
        setattr(run, name, value)
    if closed:
        metrics.sync_run_finished(outcome)
    return RunStep(outcome=outcome if closed else Outcome.STOPPED)


def _connection_error(connection_id: int, message: str, **changes) -> None:
    MarketplaceConnection.objects.filter(id=connection_id).update(
        last_error=message, last_error_at=timezone.now(), **changes
    )


def _run_succeed(run: SyncRun, connection: MarketplaceConnection, owner: str) -> RunStep:
    now = timezone.now()
    with transaction.atomic():
        if not _still_ours(run, owner):
            return RunStep(outcome=Outcome.STOPPED)
        changes = {"last_success_at": now, "last_error": "", "last_error_at": None}
        skipped = SyncRun.objects.filter(id=run.id).values_list("note", flat=True).first() or ""
        if SKIPPED_LIST in skipped:
            # Licenses synced, a list was refused: the connection keeps saying what to fix.
            changes.update(last_error=skipped[skipped.index(SKIPPED_LIST) :], last_error_at=now)
        if run.mode == SyncRun.Mode.FULL:
            changes["full_sync_completed_at"] = now
        MarketplaceConnection.objects.filter(id=connection.id).update(**changes)
        return run_finish(run, Outcome.SUCCEEDED)


def _run_failure(
    run: SyncRun, connection: MarketplaceConnection, owner: str, exc: MarketplaceError
) -> RunStep:
    """Record a failed request: 401 pauses the connection, a transient error waits to retry,
    anything else closes the run; the connection's last error says so."""
    with transaction.atomic():
        if not _still_ours(run, owner):
            return RunStep(outcome=Outcome.STOPPED)  # closed meanwhile: its error is moot
        if isinstance(exc, MarketplaceUnauthorized):
            _connection_error(
                connection.id,
                exc.message,
                state=State.REQUIRES_AUTHENTICATION,
                state_changed_at=timezone.now(),
            )
            connection.state = State.REQUIRES_AUTHENTICATION
            connection_schedule_keep_in_step(connection)
            return run_finish(run, Outcome.UNAUTHORIZED, exc.message)
        _connection_error(connection.id, exc.message)
        if exc.transient and run.attempts < TASK_RETRIES:
            delay = task_backoff_seconds(run.attempts, exc.retry_after)
            run.attempts += 1
            run.retries += 1
            retry_at = timezone.now() + timedelta(seconds=delay)
            run.outcome = Outcome.RETRYING
            run.error = (
                f"{exc.message}; retry {run.attempts} of {TASK_RETRIES} at "
                f"{timezone.localtime(retry_at):%H:%M:%S %Z}"
            )
            run.retry_at = retry_at
            run.save(update_fields=["attempts", "retries", "outcome", "error", "retry_at"])
            return RunStep(outcome=Outcome.RETRYING, retry_in=delay)
        if exc.transient:
            return run_finish(
                run, Outcome.FAILED, f"{exc.message} (gave up after {run.attempts} retries)"
            )
        outcome = Outcome.FAILED if isinstance(exc, MarketplaceBadAnswer) else Outcome.STOPPED
        return run_finish(run, outcome, exc.message)


# --- the run ----------------------------------------------------------------------------------
def sync_run_execute(*, run_id: int) -> RunStep:
    """Fetch and apply pages from where the run stopped until the last page or an error.

    Every commit stores the run's counters and next URL, so a retry resumes at the first page
    not yet applied. Transient errors return the delay before the next attempt; 401 pauses the
    connection; 403, 404, other 4xx and malformed answers close the run with what to check. An
    unexpected error closes the run with its type (the worker log has the rest).
    """
    run = SyncRun.objects.get(id=run_id)
    if run.outcome not in SyncRun.OPEN:
        return RunStep(outcome=run.outcome)
    owner = uuid.uuid4().hex
    if not lease_acquire(run.connection_id, owner):
        connection = MarketplaceConnection.objects.get(id=run.connection_id)
        if connection.state != State.ACTIVE:
            return run_finish(
                run,
                Outcome.STOPPED,
                f"The connection is not active ({connection.get_state_display().lower()}).",
            )
        # Another worker holds this connection's sync (a previous run still finishing, or a
        # duplicate delivery): look again shortly; the run stays open until it gets its turn.
        return RunStep(outcome="busy", retry_in=BUSY_RETRY_SECONDS)
    try:
        return _run_pages(run, owner)
    except Exception as exc:
        logger.exception("marketplace sync run %s stopped on an unexpected error", run_id)
        message = (
            f"The sync stopped on an unexpected error ({type(exc).__name__}); the worker log "
            "has the details. Pages applied before it are kept."
        )
        try:
            _connection_error(run.connection_id, message)
            return run_finish(run, Outcome.FAILED, message)
        except Exception:  # the database itself is gone: the dead-run sweep closes the run
            logger.exception("could not record the failure of marketplace sync run %s", run_id)
            raise exc from None
    finally:
        lease_release(run.connection_id, owner)


def _stage_first_url(
    client: MarketplaceClient, connection: MarketplaceConnection, run: SyncRun
) -> str:
    since = run.last_updated_from.isoformat() if run.last_updated_from else None
    developer, app = connection.developer_id, connection.marketplace_product_id
    if run.stage == Stage.TRANSACTIONS:
        return client.transactions_url(developer_id=developer, product_id=app, last_updated=since)
    if run.stage == Stage.FEEDBACK:
        # Feedback has no lastUpdated: an updated sync asks for that given since the same day.
        return client.feedback_url(developer_id=developer, product_id=app, start_date=since)
    return client.licenses_url(developer_id=developer, product_id=app, last_updated=since)


def _run_pages(run: SyncRun, owner: str) -> RunStep:
    connection = MarketplaceConnection.objects.get(id=run.connection_id)
    client = MarketplaceClient(
        email=connection.email, api_token=connection.api_token or "", base_url=connection.api_url
    )
    # Running again: a waiting-to-retry message no longer describes the run.
    if not _heartbeat(run, owner, outcome=Outcome.RUNNING, error=""):
        return run_finish(run, Outcome.STOPPED, "Stopped: the connection left the active state.")
    first = True
    while run.stage != Stage.TRAITS:
        if not first and not _heartbeat(run, owner):
            return RunStep(outcome=Outcome.STOPPED)
        first = False
        step = _stage_pages(run, owner, connection, client)
        if step is not None:
            return step
    if not _traits_stage(run, connection, owner):
        return RunStep(outcome=Outcome.STOPPED)
    return _run_succeed(run, connection, owner)


def _stage_pages(
    run: SyncRun, owner: str, connection: MarketplaceConnection, client: MarketplaceClient
) -> RunStep | None:
    """Fetch and apply the pages of the run's current stage from where it stopped; None when
    its last page is applied (the run then is in the next stage), else how the run ends now."""
    url: str | None = run.next_url or _stage_first_url(client, connection, run)
    key = _RECORDS_KEY[run.stage]
    visited: set[str] = set()
    while url:
        # Fetch a few pages, then apply them in one transaction with the URL to continue
        # from: fewer round trips, and a failure part-way still keeps what was fetched.
        records: list = []
        pages = 0
        failure: MarketplaceError | None = None
        while url and pages < PAGES_PER_COMMIT:
            if url in visited or len(visited) >= MAX_PAGES:
                failure = MarketplaceBadAnswer(
                    f"The marketplace's pages do not end: {urlsplit(url).path} came again."
                )
                break
            if pages and not _heartbeat(run, owner):
                return RunStep(outcome=Outcome.STOPPED)  # closed by whoever stopped it
            try:
                page = client.report_page(url, key)
            except MarketplaceError as exc:
                failure = exc
                break
            visited.add(url)
            records.extend(page.records)
            pages += 1
            url = page.next_url
        if pages and not _batch_commit(connection, run, owner, records, pages=pages, next_url=url):
            return RunStep(outcome=Outcome.STOPPED)
        if isinstance(failure, MarketplaceForbidden) and run.stage in _OPTIONAL_STAGES:
            return None if _stage_skip(run, owner) else RunStep(outcome=Outcome.STOPPED)
        if failure is not None:
            return _run_failure(run, connection, owner, failure)
        if url and not _heartbeat(run, owner):
            return RunStep(outcome=Outcome.STOPPED)
    return None


def _stage_skip(run: SyncRun, owner: str) -> bool:
    """The account may read licenses but not this list (a separate reporting permission): the
    run goes on without it, the licenses and the other list still sync, and the run's note
    (then the connection's last error) says which list was refused."""
    what = "sales transactions" if run.stage == Stage.TRANSACTIONS else "uninstall feedback"
    with transaction.atomic():
        if not _still_ours(run, owner):
            return False
        message = (
            f"{SKIPPED_LIST} {what}: the marketplace account lacks permission for them (403); "
            "check its reporting permissions. The traits from them stay as they were."
        )
        run.note = f"{run.note} {message}".strip()[:255]
        run.stage, run.next_url, run.attempts = _NEXT_STAGE[run.stage], "", 0
        run.save(update_fields=["note", "stage", "next_url", "attempts"])
    return True
