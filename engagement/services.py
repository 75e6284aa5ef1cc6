"""Writes to the engagement domain. Callers hold no ORM objects: they pass plain values."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from django.db import connection, transaction
from django.utils import timezone

from engagement.models import Account, Event, Membership, Product, User, Workspace

MessageKind = Literal["identify", "group", "track"]
_IN_CHUNK = 5000


@dataclass(frozen=True, slots=True)
class Message:
    """One validated call, as the domain needs it (no properties, no context beyond groupId).

    For track, `group_id` is the account the event belongs to (`context.groupId`), if named.
    """

    kind: MessageKind
    timestamp_ms: int
    user_id: str | None = None
    group_id: str | None = None
    event: str | None = None
    traits: dict | None = None


@dataclass(slots=True)
class ApplyResult:
    users_touched: set[int] = field(default_factory=set)
    accounts_touched: set[int] = field(default_factory=set)
    events_created: int = 0


def product_create(*, name: str, workspace_name: str = "Default") -> tuple[Product, Workspace]:
    """A product starts with one workspace."""
    with transaction.atomic():
        product = Product.objects.create(name=name)
        workspace = Workspace.objects.create(product=product, name=workspace_name)
    return product, workspace


def _ms_to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _chunks(values: Sequence, size: int = _IN_CHUNK) -> Iterable[Sequence]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _lock_or_create(model: type[User] | type[Account], product_id: int, tracking_ids: set[str]):
    """Rows for these tracking ids, created when missing, locked for this transaction.

    Locks are taken in id order so two workers touching the same rows cannot deadlock.
    """
    found: dict[str, User | Account] = {}
    if not tracking_ids:
        return found
    ordered = sorted(tracking_ids)

    def load(ids: Sequence[str]) -> None:
        for chunk in _chunks(list(ids)):
            rows = (
                model.objects.select_for_update()
                .filter(product_id=product_id, tracking_id__in=chunk)
                .order_by("id")
            )
            found.update({row.tracking_id: row for row in rows})

    load(ordered)
    missing = [tid for tid in ordered if tid not in found]
    if missing:
        model.objects.bulk_create(
            [model(product_id=product_id, tracking_id=tid) for tid in missing],
            ignore_conflicts=True,
        )
        load(missing)
    return found


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _merge_traits(obj: User | Account, traits: dict, timestamp_ms: int) -> bool:
    """Per key, the value with the later message time wins; ties go to the larger value so
    that the outcome never depends on the order in which messages are applied."""
    changed = False
    for key, value in traits.items():
        previous_ms = obj.trait_times.get(key)
        if previous_ms is not None:
            if timestamp_ms < previous_ms:
                continue
            if timestamp_ms == previous_ms and _canonical(value) <= _canonical(obj.traits.get(key)):
                continue
        obj.traits[key] = value
        obj.trait_times[key] = timestamp_ms
        changed = True
    return changed


def _user_email(user: User) -> str:
    email = user.traits.get("email")
    return email[:320] if isinstance(email, str) else ""


_ROLLUP_UPSERT = """
INSERT INTO engagement_eventrollup
    (product_id, user_id, account_id, account_key, event_name, day, count, last_at, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (user_id, account_key, event_name, day) DO UPDATE SET
    count = engagement_eventrollup.count + excluded.count,
    updated_at = excluded.updated_at,
    last_at = CASE WHEN excluded.last_at > engagement_eventrollup.last_at
                   THEN excluded.last_at ELSE engagement_eventrollup.last_at END
"""


def _rollups_add(product_id: int, events: Sequence[Event]) -> None:
    totals: dict[tuple[int, int, str, object], list] = {}
    for event in events:
        key = (event.user_id, event.account_id or 0, event.name, event.timestamp.date())
        entry = totals.get(key)
        if entry is None:
            totals[key] = [1, event.timestamp]
        else:
            entry[0] += 1
            if event.timestamp > entry[1]:
                entry[1] = event.timestamp
    ops = connection.ops
    updated_at = ops.adapt_datetimefield_value(timezone.now())
    rows = [
        (
            product_id,
            user_id,
            account_key or None,
            account_key,
            name,
            ops.adapt_datefield_value(day),
            count,
            ops.adapt_datetimefield_value(last_at),
            updated_at,
        )
        for (user_id, account_key, name, day), (count, last_at) in sorted(
            totals.items(), key=lambda item: (item[0][0], item[0][1], item[0][2], str(item[0][3]))
        )
    ]
    with connection.cursor() as cursor:
        cursor.executemany(_ROLLUP_UPSERT, rows)


def messages_apply(*, product_id: int, messages: Sequence[Message]) -> ApplyResult:
    """Apply validated identify/group/track messages of one product.

    Any order of the same messages ends in the same users, accounts, traits and links. A track
    for an unknown user creates that user as not yet identified. An event counts for the account
    its message names, else the user's most recently linked account.
    """
    result = ApplyResult()
    if not messages:
        return result
    ordered = sorted(messages, key=lambda m: m.timestamp_ms)
    user_ids = {m.user_id for m in ordered if m.user_id}
    account_ids = {m.group_id for m in ordered if m.group_id}

    with transaction.atomic():
        users = _lock_or_create(User, product_id, user_ids)
        accounts = _lock_or_create(Account, product_id, account_ids)
        links: dict[tuple[int, int], datetime] = {}
        tracks: list[Message] = []

        for message in ordered:
            when = _ms_to_datetime(message.timestamp_ms)
            user = users.get(message.user_id) if message.user_id else None
            account = accounts.get(message.group_id) if message.group_id else None
            if user is not None and (user.first_seen_at is None or when < user.first_seen_at):
                user.first_seen_at = when
            if message.kind == "identify":
                user.identified = True
                if message.traits:
                    _merge_traits(user, message.traits, message.timestamp_ms)
                    user.email = _user_email(user)
            elif message.kind == "group":
                account.identified = True
                if message.traits:
                    _merge_traits(account, message.traits, message.timestamp_ms)
            else:
                tracks.append(message)
                if user.last_seen_at is None or when > user.last_seen_at:
                    user.last_seen_at = when
                continue
            if user is not None and account is not None:
                key = (user.id, account.id)
                if key not in links or when > links[key]:
                    links[key] = when

        memberships = _memberships_upsert(set(u.id for u in users.values()), links)
        latest_account = _latest_account_by_user(memberships)

        events = []
        for message in tracks:
            user = users[message.user_id]
            if message.group_id:
                account_id = accounts[message.group_id].id
            else:
                account_id = latest_account.get(user.id)
            events.append(
                Event(
                    product_id=product_id,
                    user_id=user.id,
                    account_id=account_id,
                    name=message.event,
                    timestamp=_ms_to_datetime(message.timestamp_ms),
                )
            )
            if account_id:
                result.accounts_touched.add(account_id)
        if events:
            Event.objects.bulk_create(events, batch_size=2000)
            _rollups_add(product_id, events)

        if users:
            User.objects.bulk_update(
                list(users.values()),
                ["traits", "trait_times", "identified", "email", "first_seen_at", "last_seen_at"],
                batch_size=1000,
            )
        if accounts:
            Account.objects.bulk_update(
                list(accounts.values()), ["traits", "trait_times", "identified"], batch_size=1000
            )
    result.users_touched.update(u.id for u in users.values())
    result.accounts_touched.update(a.id for a in accounts.values())
    result.accounts_touched.update(account_id for _, account_id in links)
    result.events_created = len(events)
    return result


def _memberships_upsert(
    user_ids: set[int], links: dict[tuple[int, int], datetime]
) -> list[tuple[int, int, datetime]]:
    """Create or move forward the links; return every link of these users (user, account, when)."""
    existing: dict[tuple[int, int], Membership] = {}
    for chunk in _chunks(sorted(user_ids)):
        for membership in Membership.objects.filter(user_id__in=chunk):
            existing[(membership.user_id, membership.account_id)] = membership
    to_create, to_update = [], []
    for (user_id, account_id), when in links.items():
        membership = existing.get((user_id, account_id))
        if membership is None:
            membership = Membership(user_id=user_id, account_id=account_id, linked_at=when)
            existing[(user_id, account_id)] = membership
            to_create.append(membership)
        elif when > membership.linked_at:
            membership.linked_at = when
            to_update.append(membership)
    if to_create:
        Membership.objects.bulk_create(to_create, ignore_conflicts=True)
    if to_update:
        Membership.objects.bulk_update(to_update, ["linked_at"])
    return [(m.user_id, m.account_id, m.linked_at) for m in existing.values()]


def _latest_account_by_user(memberships: list[tuple[int, int, datetime]]) -> dict[int, int]:
    latest: dict[int, tuple[datetime, int]] = {}
    for user_id, account_id, when in memberships:
        current = latest.get(user_id)
        if current is None or (when, account_id) > current:
            latest[user_id] = (when, account_id)
    return {user_id: account_id for user_id, (_, account_id) in latest.items()}
