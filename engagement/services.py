"""Writes to the engagement domain. Callers hold no ORM objects: they pass plain values."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from engagement import event_store
from engagement.aliases import alias_apply, aliases_resolve
from engagement.builtin_segments import builtin_segments_create
from engagement.hierarchy import RefusedParent, account_parents_apply, parent_named
from engagement.models import (
    Account,
    EventActivity,
    Product,
    Workspace,
)
from engagement.people_rows import (
    AccountState,
    UserState,
    accounts_lock_or_create,
    accounts_write,
    links_upsert,
    merge_traits,
    ms_to_datetime,
    staged_links_missing,
    users_lock_or_create,
    users_write,
)
from engagement.presentation import MARKETPLACE_PREFIX
from engagement.scoring.demand import scores_refresh_soon
from engagement.track_staging import StagedTracks, TrackRow, staged_tracks_start

MessageType = Literal["identify", "group", "track", "alias"]


@dataclass(frozen=True, slots=True)
class Message:
    """One validated call, as the domain needs it (no properties, no context beyond groupId).

    For track, `group_id` is the account the event belongs to (`context.groupId`), if named.
    """

    message_type: MessageType  # Segment's "type"
    timestamp_ms: int
    user_id: str | None = None
    group_id: str | None = None
    event: str | None = None
    traits: dict | None = None
    previous_id: str | None = None  # alias: the id merged into `user_id`
    # The caller's, echoed in what refers back to the call (hierarchy.RefusedParent.source).
    source: object = field(default=None, compare=False)


@dataclass(slots=True)
class ApplyResult:
    users_touched: set[int] = field(default_factory=set)
    accounts_touched: set[int] = field(default_factory=set)
    events_created: int = 0
    refused_parents: list[RefusedParent] = field(default_factory=list)


def product_create(*, name: str, workspace_name: str = "Default") -> tuple[Product, Workspace]:
    """A product starts with one workspace."""
    with transaction.atomic():
        product = Product.objects.create(name=name)
        workspace = workspace_create(product=product, name=workspace_name)
    return product, workspace


def workspace_create(*, product: Product, name: str) -> Workspace:
    """A workspace, with the built-in segments every workspace starts with."""
    with transaction.atomic():
        workspace = Workspace.objects.create(product=product, name=name)
        builtin_segments_create(workspace=workspace)
    return workspace


def _messages_fold(
    ordered: Sequence[Message],
    users: dict[str, UserState],
    accounts: dict[str, AccountState],
) -> dict[tuple[int, int], datetime]:
    """Fold identifies and groups, oldest first, into the locked users and accounts (traits,
    identified, first seen); returns the (user, account) links with their latest time."""
    links: dict[tuple[int, int], datetime] = {}
    for message in ordered:
        user = users.get(message.user_id) if message.user_id else None
        when = ms_to_datetime(message.timestamp_ms)
        account = accounts.get(message.group_id) if message.group_id else None
        if user is not None and (user.first_seen_at is None or when < user.first_seen_at):
            user.first_seen_at = when
            user.changed = True
        if message.message_type == "identify":
            assert user is not None  # a validated identify names its user
            if not user.identified:
                user.identified = user.changed = True
            if message.traits and merge_traits(user, message.traits, message.timestamp_ms):
                user.changed = True
        else:
            assert account is not None  # a validated group names its account
            if not account.identified:
                account.identified = account.changed = True
            if message.traits and merge_traits(account, message.traits, message.timestamp_ms):
                account.changed = True
        if user is not None and account is not None:
            key = (user.id, account.id)
            if key not in links or when > links[key]:
                links[key] = when
            user.changed = True
    return links


def _tracks_link(
    staged: event_store.StagedTrackIds,
    users: dict[str, UserState],
    links: dict[tuple[int, int], datetime],
) -> None:
    """A track that names an account (`context.groupId`) links its user to that account when
    the two are not linked yet, as a group call without traits would: the account was created
    with the others this call names, the link joins `links` (at the latest time of those
    tracks, or of a group call linking the two in this call) and its user is marked changed,
    as _messages_fold marks a linked user. One query per call, not one per track."""
    missing = staged_links_missing(staged.users, staged.accounts)
    if not missing:
        return
    by_id = {user.id: user for user in users.values()}
    for key, when in missing.items():
        if key not in links or when > links[key]:
            links[key] = when
        by_id[key[0]].changed = True


def _tracks_stage(
    messages: Sequence[Message], staged_tracks: StagedTracks | None
) -> StagedTracks | None:
    """The tracks of `messages` added to the caller's staged tracks (or to a new staging)."""
    rows: list[TrackRow] = []
    for m in messages:
        if m.message_type == "track":
            assert m.user_id is not None and m.event is not None  # a validated track names both
            rows.append((m.user_id, m.group_id, m.event, m.timestamp_ms))
    if rows:
        staged_tracks = staged_tracks or staged_tracks_start()
        staged_tracks.add(rows)
    return staged_tracks


def messages_apply(
    *,
    product_id: int,
    messages: Sequence[Message],
    staged_tracks: StagedTracks | None = None,
) -> ApplyResult:
    """Apply validated identify/group/track/alias messages of one product, together with the
    tracks a caller already staged in this transaction (`staged_tracks`, see track_staging).

    Tracks take one route, whichever way they come: staged, then stored by the event store,
    which decides in SQL which account each counts for (the account its message names, else
    the user's most recently linked account, links written by this call included). A track for
    an unknown user creates that user as not yet identified. Any order of the same messages
    ends in the same users, accounts, traits and links.

    A fixed number of set-based statements per call, whatever the number of messages: no query
    per message (bench/bench_ingest.py measures the rate of one worker).
    """
    with transaction.atomic():
        tracks = _tracks_stage(messages, staged_tracks)
        applied = _messages_apply(
            product_id, [m for m in messages if m.message_type != "track"], tracks
        )
        scores_refresh_soon(product_id=product_id)
        return applied


def _accounts_lock(
    product_id: int, ordered: Sequence[Message], staged_accounts: set[str]
) -> tuple[dict[str, AccountState], dict[str, Message]]:
    """The accounts these messages name, and the parents their group calls name, locked or
    created (those a group call changes locked); and the group calls that name a parent, the
    latest per account (engagement/hierarchy)."""
    parents_asked = {
        m.group_id: m
        for m in ordered
        if m.message_type == "group" and m.group_id and parent_named(m.traits) is not None
    }
    # A parent named "" is one removed: no account to lock.
    parents = {p for m in parents_asked.values() if (p := parent_named(m.traits))}
    accounts = accounts_lock_or_create(
        product_id,
        {m.group_id for m in ordered if m.group_id} | staged_accounts | parents,
        lock={m.group_id for m in ordered if m.message_type == "group" and m.group_id},
    )
    return accounts, parents_asked


def _messages_apply(
    product_id: int, messages: Sequence[Message], tracks: StagedTracks | None
) -> ApplyResult:
    result = ApplyResult()
    staged_users, staged_accounts = tracks.tracking_ids() if tracks else (set(), set())
    if not messages and not staged_users:
        return result
    # Ids an alias merged into another user are that user's; aliases themselves go last, so
    # the outcome is the same whichever way they are ordered with the other calls.
    merged = aliases_resolve(product_id, {m.user_id for m in messages if m.user_id} | staged_users)
    ordered = sorted(
        (
            replace(m, user_id=merged.get(m.user_id, m.user_id)) if merged and m.user_id else m
            for m in messages
            if m.message_type != "alias"
        ),
        key=lambda m: m.timestamp_ms,
    )
    alias_calls = sorted(
        (m for m in messages if m.message_type == "alias"), key=lambda m: m.timestamp_ms
    )
    users = users_lock_or_create(
        product_id,
        {m.user_id for m in ordered if m.user_id} | {merged.get(t, t) for t in staged_users},
        with_traits={
            m.user_id for m in ordered if m.message_type == "identify" and m.traits and m.user_id
        },
    )
    accounts, parents_asked = _accounts_lock(product_id, ordered, staged_accounts)
    links = _messages_fold(ordered, users, accounts)
    staged = event_store.StagedTrackIds(
        users={tid: users[merged.get(tid, tid)].id for tid in staged_users},
        accounts={tid: accounts[tid].id for tid in staged_accounts},
    )
    _tracks_link(staged, users, links)
    now = timezone.now()
    users_write(users.values(), now)
    accounts_write(accounts.values(), now)
    links_upsert(links)
    if parents_asked:
        result.refused_parents = account_parents_apply(
            product_id, accounts, [(tid, m.source) for tid, m in parents_asked.items()]
        )
    if staged_users:
        stored = event_store.events_store(product_id=product_id, staged=staged)
        result.accounts_touched.update(stored.account_ids)
        result.events_created = stored.count
    _aliases_apply(product_id, alias_calls, result)
    result.users_touched.update(u.id for u in users.values())
    result.accounts_touched.update(a.id for a in accounts.values())
    result.accounts_touched.update(account_id for _, account_id in links)
    return result


def _aliases_apply(product_id: int, alias_calls: Sequence[Message], result: ApplyResult) -> None:
    """Merge each alias call's previous id into its user, in order; note whom they touched."""
    for call in alias_calls:
        assert call.previous_id is not None and call.user_id is not None  # a valid alias has both
        merge = alias_apply(
            product_id=product_id,
            previous_id=call.previous_id,
            user_id=call.user_id,
            timestamp_ms=call.timestamp_ms,
        )
        result.users_touched |= merge.users_touched
        result.accounts_touched |= merge.accounts_touched


@dataclass(frozen=True, slots=True)
class PrefixedTraitsResult:
    matched: int  # accounts that existed before
    created: int  # accounts created (not yet identified) so the traits wait there
    changed: int = 0  # accounts written: created, or their prefixed traits (or name) differed


def account_prefixed_traits_replace(
    *,
    product_id: int,
    traits_by_tracking_id: dict[str, dict],
    prefix: str = MARKETPLACE_PREFIX,
    fallback_names: dict[str, str] | None = None,
    create_missing: bool = True,
) -> PrefixedTraitsResult:
    """Replace every trait whose key starts with `prefix` on these accounts; others stay.

    A missing account is created as not yet identified (unless `create_missing` is False: then
    only existing accounts are written, so a recomputation never brings back an erased account).
    An account whose prefixed traits (and fallback name) are already these is not written at all:
    its trait times and `updated_at` stay, and no score refresh sees it as changed.
    Every new key must start with the prefix.
    `fallback_names` (tracking id -> name, e.g. a license's company) becomes the `name` trait of
    an account that has none, stamped with time 0 so that any identify naming the account wins;
    a name set that way is kept up to date by later calls.
    Bulk queries only; rows are locked the same way `messages_apply` locks them, so an ingestion
    worker merging traits at the same moment cannot lose either write.
    """
    if not traits_by_tracking_id:
        return PrefixedTraitsResult(matched=0, created=0)
    for tracking_id, traits in traits_by_tracking_id.items():
        stray = [key for key in traits if not key.startswith(prefix)]
        if stray:
            raise ValueError(f"traits for {tracking_id!r} outside the {prefix!r} prefix: {stray}")
    tracking_ids = set(traits_by_tracking_id)
    if not create_missing:
        existing = Account.objects.filter(product_id=product_id, tracking_id__in=tracking_ids)
        tracking_ids = set(existing.values_list("tracking_id", flat=True))
    with transaction.atomic():
        # Locked (or created) as messages_apply locks accounts: no deadlock with a drain.
        accounts = accounts_lock_or_create(product_id, tracking_ids, lock=tracking_ids)
        # Stamped once locked: the lock may wait for a drain, and a refresh that began meanwhile
        # re-reads changes only shortly before its watermark (scoring.changes.clock_margin).
        now = timezone.now()
        now_ms = int(now.timestamp() * 1000)
        for tracking_id, account in accounts.items():
            name = (fallback_names or {}).get(tracking_id)
            _prefixed_traits_set(account, traits_by_tracking_id[tracking_id], prefix, name, now_ms)
        accounts_write(accounts.values(), now)
    created = sum(account.created for account in accounts.values())
    changed = sum(bool(account.changed) for account in accounts.values())
    if changed:
        scores_refresh_soon(product_id=product_id)
    return PrefixedTraitsResult(matched=len(accounts) - created, created=created, changed=changed)


def _prefixed_traits_set(
    account: AccountState, wanted: dict, prefix: str, name: str | None, now_ms: int
) -> None:
    """Give a locked account these prefixed traits (and `name` as its fallback name), marking it
    changed; an account that already has them is left unchanged."""
    stored, times = account.traits, account.trait_times
    assert stored is not None and times is not None  # all locked, so read with traits
    renames = bool(
        name and stored.get("name") != name and ("name" not in stored or times.get("name") == 0)
    )
    held = {k: v for k, v in stored.items() if k.startswith(prefix)}
    if not account.created and not renames and _same_json(held, wanted):
        return  # nothing to change: not written
    account.changed = True
    for key in [k for k in stored if k.startswith(prefix)]:
        del stored[key]
        times.pop(key, None)
    for key, value in wanted.items():
        stored[key] = value
        times[key] = now_ms
    if name and ("name" not in stored or times.get("name") == 0):
        stored["name"] = name
        times["name"] = 0


def _same_json(held: dict, wanted: dict) -> bool:
    """Equal as stored JSON: 1 and 1.0 are the same number, True and 1 are not."""
    return _canonical(held) == _canonical(wanted)


def _canonical(traits: dict) -> str:
    def plain(value):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return value
        return float(value)

    return json.dumps({k: plain(v) for k, v in traits.items()}, sort_keys=True, default=str)


def event_activity_purge(*, now: datetime | None = None) -> int:
    """Forget applied event batches older than SCORING_ACTIVITY_KEEP_MINUTES (a refresh whose
    watermark is older rescores in full, so nothing it needed is lost)."""
    cutoff = (now or timezone.now()) - timedelta(minutes=settings.SCORING_ACTIVITY_KEEP_MINUTES)
    deleted, _ = EventActivity.objects.filter(applied_at__lt=cutoff).delete()
    return deleted


def event_partitions_maintain(*, today: date | None = None) -> dict[str, int]:
    """Daily event partitions ahead of time, and raw events past EVENTS_RETENTION_DAYS gone
    (whole partitions dropped on PostgreSQL). Rollups, and so scores, are kept."""
    return event_store.partitions_maintain(
        today=today or timezone.now().astimezone(UTC).date(),
        days_ahead=7,
        retention_days=settings.EVENTS_RETENTION_DAYS,
    )


def event_rollups_order(*, today: date | None = None) -> dict[str, int]:
    """The rollups of the days that ended stored again by account, then user, a few days per
    product per run (event_store.rollups_order_past_days): what a refresh, a full rescore and
    the history read."""
    return event_store.rollups_order_past_days(
        today=today or timezone.now().astimezone(UTC).date(),
        days_per_product=settings.ROLLUPS_ORDER_DAYS_PER_RUN,
    )
