"""Erasing a user or an account on request, with what it removes counted, and suppression of
their tracking id for data that arrives later.

A request is recorded first (`erasure_request`, status pending) and the work runs in a Celery
task (`erasure_run`): the person's rows go in one transaction, with what other apps hold about
them (engagement.erasure_hooks), and the product's workspaces are marked for a full rescore so
the next refresh recomputes every score without them. Its locks are taken in the order the
ingestion worker takes them (`_erase`); a transient failure (a deadlock, a lost connection) is
tried again until the erasure completes, and only another cause marks it failed.
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, time, timedelta
from time import sleep

from celery import current_app
from django.db import connection, transaction
from django.db.models import Max, Min, Q
from django.utils import timezone
from django.utils.crypto import salted_hmac

from engagement.bulk import execute
from engagement.dependents import dependents_delete
from engagement.erasure_hooks import ErasureStage, ErasureTarget, erasure_hooks_run
from engagement.event_store import rollups_merge
from engagement.models import (
    Account,
    Erasure,
    Event,
    EventRollup,
    ScoringState,
    Suppression,
    User,
    UserAlias,
    Workspace,
)
from engagement.scoring.demand import scores_refresh_soon
from engagement.transient import is_transient

logger = logging.getLogger(__name__)

_HASH_SALT = "engagement.erasure.suppression"


class ErasureTargetMissing(LookupError):
    """The user or account is not the product's (or no longer exists)."""


def tracking_id_hash(*, product_id: int, kind: str, tracking_id: str) -> str:
    """The keyed hash a suppression keeps: HMAC-SHA256 under a key derived from SECRET_KEY, so
    the stored value cannot be checked against guessed tracking ids without that key."""
    return salted_hmac(
        _HASH_SALT, f"{product_id}:{kind}:{tracking_id}", algorithm="sha256"
    ).hexdigest()


def suppressed_hashes(*, product_id: int) -> dict[str, frozenset[str]]:
    """The product's suppressed hashes by kind: one indexed query (what the worker asks once
    per product and batch)."""
    found: dict[str, set[str]] = {}
    rows = Suppression.objects.filter(product_id=product_id).values_list("kind", "tracking_hash")
    for kind, tracking_hash in rows:
        found.setdefault(kind, set()).add(tracking_hash)
    return {kind: frozenset(hashes) for kind, hashes in found.items()}


def suppression_lift(*, suppression_id: int) -> bool:
    """Data for that tracking id is applied again from now on; False if it was already lifted."""
    deleted, _ = Suppression.objects.filter(id=suppression_id).delete()
    return bool(deleted)


def _target_model(kind: str) -> type[User] | type[Account]:
    return User if kind == Erasure.Kind.USER else Account


ERASURE_TASK = "engagement.tasks.erasure_run_task"


def erasure_request(
    *,
    product_id: int,
    kind: str,
    target_id: int,
    suppress: bool,
    via: str,
    token_id: int | None = None,
    admin_user_id: int | None = None,
) -> Erasure:
    """Record an erasure of the product's user or account (ErasureTargetMissing if it has
    none with that id), suppress its tracking id at once if asked, and queue the work."""
    # By name from Celery's registry: engagement.tasks imports this module, not the reverse.
    erasure_run_task = current_app.tasks[ERASURE_TASK]
    with transaction.atomic():
        target = _target_model(kind).objects.filter(product_id=product_id, id=target_id).first()
        if target is None:
            raise ErasureTargetMissing(f"{kind} {target_id}")
        erasure = Erasure.objects.create(
            product_id=product_id,
            kind=kind,
            target_id=target_id,
            suppress=suppress,
            via=via,
            requested_by_token_id=token_id,
            requested_by_admin_id=admin_user_id,
        )
        if suppress:
            # From now on, not from the erasure's end: what arrives in between is dropped too.
            # A user's ids that aliases merged into it are the same person's.
            for tracking_id in (target.tracking_id, *_merged_ids(erasure.kind, target)):
                Suppression.objects.get_or_create(
                    product_id=product_id,
                    kind=kind,
                    tracking_hash=tracking_id_hash(
                        product_id=product_id, kind=kind, tracking_id=tracking_id
                    ),
                    defaults={"erasure": erasure},
                )
        transaction.on_commit(lambda: erasure_run_task.delay(erasure.id))
    return erasure


# An erasure still pending or running this long after its last start has lost its task (a
# database restored from a backup under a new broker, a flushed broker): the sweep queues it
# again. Longer than the task's longest retry pause (ERASURE_RETRY_MAX_SECONDS in tasks).
ERASURE_STALLED_AFTER = timedelta(minutes=10)


def erasures_stalled_requeue(*, now: datetime | None = None) -> int:
    """Queue again every erasure left pending or running past ERASURE_STALLED_AFTER; returns
    how many. A second task for one that is still being run is harmless: a run holds the
    erasure's row (_erasure_attempt) and the other skips it."""
    erasure_run_task = current_app.tasks[ERASURE_TASK]
    before = (now or timezone.now()) - ERASURE_STALLED_AFTER
    stalled = list(
        Erasure.objects.filter(
            Q(status=Erasure.Status.PENDING, requested_at__lt=before)
            | Q(status=Erasure.Status.RUNNING, started_at__lt=before)
        ).values_list("id", flat=True)
    )
    for erasure_id in stalled:
        erasure_run_task.delay(erasure_id)
        # The clock restarts: the next sweep waits another period before queueing it again.
        Erasure.objects.filter(id=erasure_id, status=Erasure.Status.RUNNING).update(
            started_at=timezone.now()
        )
    return len(stalled)


def erasure_get_for_product(*, product_id: int, erasure_id: int) -> Erasure | None:
    return Erasure.objects.filter(product_id=product_id, id=erasure_id).first()


class ErasureDeferred(Exception):
    """A transient failure (deadlock, lost connection, ...) outlasted the quick retries: the
    erasure stays `running` and must be run again later (the task retries it with a backoff)."""


# Tries in one call of erasure_run, and the pause before each next one: a deadlock or a
# serialization failure passes at once; a database that is restarting takes longer, and the
# task's own retries (engagement.tasks) wait for it without holding a worker.
QUICK_TRIES = 4
_QUICK_PAUSES = (0.05, 0.2, 1.0)


def erasure_run(*, erasure_id: int, tries: int = QUICK_TRIES) -> Erasure | None:
    """Carry out a pending erasure, or one left running by a run that was interrupted; None if
    there is none with that id to run (done, failed, or being run elsewhere right now).

    A transient failure is tried again (`tries` in all here, then ErasureDeferred): the
    erasure's one transaction rolled back, so each try starts afresh. Any other failure marks
    it failed, with its cause, and is raised."""
    if not _erasure_mark_running(erasure_id):
        return None
    for attempt in range(1, tries + 1):
        try:
            return _erasure_attempt(erasure_id)
        except Exception as error:
            if not is_transient(error):
                Erasure.objects.filter(id=erasure_id, status=Erasure.Status.RUNNING).update(
                    status=Erasure.Status.FAILED, error=type(error).__name__[:200]
                )
                raise
            logger.warning(
                "erasure %s: try %s of %s met a transient %s (%s)",
                erasure_id,
                attempt,
                tries,
                type(error).__name__,
                type(error.__cause__ or error).__name__,  # the driver's: DeadlockDetected, ...
            )
            _connection_reset()
            if attempt == tries:
                raise ErasureDeferred(f"erasure {erasure_id}") from error
            sleep(_QUICK_PAUSES[min(attempt, len(_QUICK_PAUSES)) - 1])
    return None  # tries < 1: nothing tried


def _erasure_mark_running(erasure_id: int) -> bool:
    """Mark a pending erasure running (the receipt shows it at once); True if it is running
    now and no other run holds it."""
    with transaction.atomic():
        erasure = (
            Erasure.objects.select_for_update(skip_locked=True)
            .filter(id=erasure_id, status__in=(Erasure.Status.PENDING, Erasure.Status.RUNNING))
            .first()
        )
        if erasure is None:
            return False
        if erasure.status == Erasure.Status.PENDING:
            erasure.status = Erasure.Status.RUNNING
            erasure.started_at = timezone.now()
            erasure.save(update_fields=["status", "started_at"])
    return True


def _erasure_attempt(erasure_id: int) -> Erasure | None:
    """Erase, and mark the erasure completed, in one transaction that holds the erasure's row:
    a second run of the same erasure (a redelivered task) skips it, and a crash part-way
    leaves it running with nothing erased, for the next run."""
    with transaction.atomic():
        erasure = (
            Erasure.objects.select_for_update(skip_locked=True)
            .filter(id=erasure_id, status=Erasure.Status.RUNNING)
            .first()
        )
        if erasure is None:
            return None
        erasure.counts = _erase(erasure)
        erasure.status = Erasure.Status.COMPLETED
        erasure.completed_at = timezone.now()
        erasure.error = ""
        erasure.save(update_fields=["counts", "status", "completed_at", "error"])
    logger.info("erasure %s of a %s completed: %s", erasure.id, erasure.kind, erasure.counts)
    return erasure


def _connection_reset() -> None:
    """After a transient failure outside any outer transaction, drop a connection that broke
    (a terminated session, a restarted server), so the next try opens a fresh one."""
    if not connection.in_atomic_block:
        connection.close_if_unusable_or_obsolete()


def erasure_failure_reason(erasure: Erasure) -> str | None:
    """What the receipt of a failed erasure says: the cause's class and that nothing was erased;
    never the error's message, which could quote a value."""
    if erasure.status != Erasure.Status.FAILED:
        return None
    cause = erasure.error or "An error"
    return (
        f"{cause}: a failure that retrying cannot fix stopped the erasure, and nothing was "
        "erased. The worker's log has the details; request the erasure again once it is fixed."
    )


def _erase(erasure: Erasure) -> dict[str, int]:
    """Erase the target and what other apps hold about it, taking locks in the order every
    other writer takes them (see docs/erasure.md, "Lock order"):

    1. the product's ScoringState rows: a refresh holds its workspace's for its whole run and
       then writes score and segment rows of users and accounts, so the erasure waits for a
       running refresh here, holding nothing it needs (a refresh that starts meanwhile skips
       the locked row and says busy);
    2. waiting accepted requests that name the target (the BEFORE_TARGET hooks): a drain locks
       its accepted rows before any user or account, and never waits for a row (SKIP LOCKED);
    3. the user's or account's row: a drain locks the users of its batch (and the accounts its
       group calls change) next, in id order, before it writes anything that refers to them;
    4. what refers to the target, then the row, then the AFTER_TARGET hooks.
    """
    model = _target_model(erasure.kind)
    product_workspaces = Workspace.objects.filter(product_id=erasure.product_id).values("id")
    workspaces = ScoringState.objects.filter(workspace_id__in=product_workspaces)
    list(workspaces.select_for_update().order_by("pk").values_list("pk", flat=True))
    found = model.objects.filter(product_id=erasure.product_id, id=erasure.target_id).first()
    if found is None:  # erased by an earlier request meanwhile: nothing of it is left
        return {}
    who = _erasure_target(erasure, found)
    counts = erasure_hooks_run(who, ErasureStage.BEFORE_TARGET)
    # What other apps hold under the ids aliases merged into a user (waiting messages, seen
    # messageIds): the same person's. Its UserAlias rows go with the user's dependents.
    merged = [
        ErasureTarget(product_id=erasure.product_id, kind=erasure.kind, tracking_id=tid, email="")
        for tid in _merged_ids(erasure.kind, found)
    ]
    for alias in merged:
        _counts_add(counts, erasure_hooks_run(alias, ErasureStage.BEFORE_TARGET))
    target = model.objects.select_for_update().filter(id=found.id).first()
    if target is None:  # erased by another request while this one waited
        return counts
    if _erasure_target(erasure, target) != who:  # its email changed while this one waited
        who = _erasure_target(erasure, target)
        _counts_add(counts, erasure_hooks_run(who, ErasureStage.BEFORE_TARGET))
    if isinstance(target, User):  # the erasure's kind chose the model
        _counts_add(counts, _user_erase(target))
    else:
        _counts_add(counts, _account_erase(target))
    _counts_add(counts, erasure_hooks_run(who))
    for alias in merged:
        _counts_add(counts, erasure_hooks_run(alias))
    # A changed digest makes the next refresh rescore in full: every score, percentile and
    # account total is then computed without the erased rows.
    workspaces.update(config_digest="")
    scores_refresh_soon(product_id=erasure.product_id)
    return counts


def _merged_ids(kind: str, target: User | Account) -> list[str]:
    """The tracking ids aliases merged into a user (an account has none)."""
    if kind != Erasure.Kind.USER:
        return []
    return sorted(UserAlias.objects.filter(user_id=target.id).values_list("previous_id", flat=True))


def _erasure_target(erasure: Erasure, target: User | Account) -> ErasureTarget:
    return ErasureTarget(
        product_id=erasure.product_id,
        kind=erasure.kind,
        tracking_id=target.tracking_id,
        email=getattr(target, "email", ""),
    )


def _counts_add(counts: dict[str, int], more: dict[str, int]) -> None:
    for name, removed in more.items():
        counts[name] = counts.get(name, 0) + removed


def _dt(value: datetime) -> object:
    return connection.ops.adapt_datetimefield_value(value)


def _days_bounds(first: date, last: date) -> tuple[object, object]:
    """The instants from the first day's start to the end of the last (UTC), as parameters: a
    range over the raw events' partition key, so only those days' partitions are read."""
    start = datetime.combine(first, time.min, tzinfo=UTC)
    return _dt(start), _dt(datetime.combine(last, time.min, tzinfo=UTC) + timedelta(1))


# The overview's daily tallies have no user to delete by: each (day, event name) of the user's
# rollups (which hold every event they were told of, as the tallies do) is appended once more,
# negated, so the sums drop them; the compaction folds the rows together.
_TALLIES_SUBTRACT = """
    INSERT INTO engagement_eventdaytally (product_id, day, event_name, count)
    SELECT product_id, day, event_name, -SUM(count) FROM engagement_eventrollup
    WHERE product_id = %s AND user_id = %s
    GROUP BY product_id, day, event_name"""


def _user_erase(user: User) -> dict[str, int]:
    rollups = EventRollup.objects.filter(product_id=user.product_id, user_id=user.id)
    days = rollups.aggregate(first=Min("day"), last=Max("day"))
    counts = {"users": 0, "events": 0}
    if days["first"] is not None:
        # Raw events have no index: the rollups say which days (partitions) hold this user's.
        start, end = _days_bounds(days["first"], days["last"])
        counts["events"] = execute(
            "DELETE FROM engagement_event WHERE product_id = %s AND user_id = %s "
            "AND timestamp >= %s AND timestamp < %s",
            [user.product_id, user.id, start, end],
        )
    execute(_TALLIES_SUBTRACT, [user.product_id, user.id])
    counts["rollups"] = rollups.delete()[0]
    counts.update(dependents_delete(user, handled=(Event, EventRollup)))
    # Its dependents are gone: a plain delete, without the ORM looking for raw events again.
    counts["users"] = execute("DELETE FROM engagement_user WHERE id = %s", [user.id])
    return counts


# A user's rollups with the erased account become rollups without an account, added to any
# such row of theirs for the same event and day (the user's own score keeps their events).
_ROLLUPS_UNLINK = rollups_merge(
    """SELECT product_id, user_id, NULL, 0, event_name, day, count, last_at, %s
    FROM engagement_eventrollup WHERE product_id = %s AND account_id = %s"""
)


def _account_erase(account: Account) -> dict[str, int]:
    rollups = EventRollup.objects.filter(product_id=account.product_id, account_id=account.id)
    days = rollups.aggregate(first=Min("day"), last=Max("day"))
    counts = {"accounts": 0, "events_unlinked": 0}
    if days["first"] is not None:
        start, end = _days_bounds(days["first"], days["last"])
        counts["events_unlinked"] = execute(
            "UPDATE engagement_event SET account_id = NULL WHERE product_id = %s "
            "AND account_id = %s AND timestamp >= %s AND timestamp < %s",
            [account.product_id, account.id, start, end],
        )
        execute(_ROLLUPS_UNLINK, [_dt(timezone.now()), account.product_id, account.id])
    counts["rollups_unlinked"] = rollups.delete()[0]
    counts.update(dependents_delete(account, handled=(Event, EventRollup)))
    counts["accounts"] = execute("DELETE FROM engagement_account WHERE id = %s", [account.id])
    return counts
