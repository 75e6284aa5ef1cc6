"""Account hierarchy: a group call whose traits carry `parent_group_id` makes its account the
child of the named account (Company > Workspace > Project), creating the parent if it is new.

A link that would close a cycle, or make a chain of more than MAX_LEVELS accounts, is refused:
the account keeps the parent it had, and the caller records the refusal (the ingestion drain logs
it as a drop with its reason). Within one batch, links are taken in the order of the accounts'
tracking ids, so the same messages always refuse the same link; across batches the later link
is the one refused. The parent link is otherwise the trait's: the latest call wins, by message
time, as for any trait; a `parent_group_id` of null or "" removes the parent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from django.utils import timezone

from engagement import bulk
from engagement.models import Account, Product, Workspace
from engagement.people_rows import AccountState
from engagement.presentation import PARENT_TRAIT

MAX_LEVELS = 10


@dataclass(frozen=True, slots=True)
class RefusedParent:
    """A parent link that was not made, and why; `source` is what the caller attached to the
    group call that asked for it (engagement.services.Message.source)."""

    account: str  # tracking ids
    parent: str
    reason: Literal["cycle", "too_deep"]
    source: object = None

    @property
    def detail(self) -> str:
        if self.reason == "cycle":
            why = "it would close a cycle (the parent is the account itself or below it)"
        else:
            why = f"the chain of accounts would be longer than {MAX_LEVELS}"
        return (
            f"Account {self.account!r} was not made a child of {self.parent!r}: {why}. "
            "The group call's traits were applied; the account keeps its previous parent."
        )


def parent_named(traits: dict | None) -> str | None:
    """The parent a group call's traits name: a tracking id, "" to remove it, None if none."""
    if not traits or PARENT_TRAIT not in traits:
        return None
    value = traits[PARENT_TRAIT]
    return "" if value is None else str(value)  # a string: checked where the call came in


def account_parents_apply(
    product_id: int,
    accounts: dict[str, AccountState],
    asked: Sequence[tuple[str, object]],
) -> list[RefusedParent]:
    """Set the parent of each account a group call of this batch asked one for (`asked`:
    tracking id and the call's source), from the account's merged `parent_group_id` trait;
    returns the links refused. The accounts and the parents must be in `accounts` (locked or
    created by the caller); a parent the merged trait names that is not there is an older
    call's, already applied."""
    wanted: dict[int, int | None] = {}
    sources: dict[int, object] = {}
    names = {state.id: tid for tid, state in accounts.items()}
    for tid, source in asked:
        named = parent_named(accounts[tid].traits)
        if named is None or (named and named not in accounts):
            continue
        wanted[accounts[tid].id] = accounts[named].id if named else None
        sources[accounts[tid].id] = source
    # Most such calls repeat the parent the account has: those need neither the lock nor the
    # product's links.
    current = dict(Account.objects.filter(id__in=wanted).values_list("id", "parent_id"))
    wanted = {child: parent for child, parent in wanted.items() if current.get(child) != parent}
    if not wanted:
        return []
    # One product's links change one at a time: two workers linking A under B and B under A
    # would each see no cycle. (SQLite has one writer anyway.)
    list(Product.objects.select_for_update().filter(id=product_id).values_list("id"))
    parents = dict(
        Account.objects.filter(product_id=product_id, parent__isnull=False).values_list(
            "id", "parent_id"
        )
    )
    previous = dict(parents)
    refused: list[RefusedParent] = []
    changed: list[tuple[int, int | None]] = []
    for child in sorted(wanted, key=names.__getitem__):
        parent = wanted[child]
        if parents.get(child) == parent:
            continue
        if parent is not None and (reason := _refusal(parents, child, parent)) is not None:
            refused.append(RefusedParent(names[child], names[parent], reason, sources[child]))
            continue
        if parent is None:
            parents.pop(child, None)
        else:
            parents[child] = parent
        changed.append((child, parent))
    bulk.update_by_id(Account, ("parent",), changed)
    # An account that lost a child is rescored, with its ancestors (the scoring's lineage):
    # its figures no longer cover that child's.
    if lost := {previous[child] for child, _ in changed if previous.get(child)}:
        Account.objects.filter(id__in=lost).update(updated_at=timezone.now())
    return refused


def _refusal(
    parents: dict[int, int], child: int, parent: int
) -> Literal["cycle", "too_deep"] | None:
    """Why `child` may not go under `parent`, given every other link, or None."""
    above = list(_chain_up(parents, parent))
    if child in above:
        return "cycle"
    if len(above) + _levels_down(parents, child) > MAX_LEVELS:
        return "too_deep"
    return None


def _chain_up(parents: dict[int, int], account: int) -> Iterable[int]:
    """The account and its ancestors, nearest first (stored links never form a cycle; the
    bound only keeps a damaged table from looping)."""
    for _ in range(MAX_LEVELS + 2):
        yield account
        if account not in parents:
            return
        account = parents[account]


def _levels_down(parents: dict[int, int], account: int) -> int:
    """Levels from the account to its deepest descendant, the account included (1 for a leaf)."""
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    levels, frontier = 0, [account]
    while frontier and levels <= MAX_LEVELS:
        levels += 1
        frontier = [c for node in frontier for c in children.get(node, ())]
    return levels


# --- Reads ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AccountRef:
    id: int
    tracking_id: str


def account_parents(
    *, workspace: Workspace, target: str, ids: Sequence[int]
) -> dict[int, AccountRef | None]:
    """Per account id: its parent, or None (a page at a time; `target` is "account")."""
    parents: dict[int, AccountRef | None] = dict.fromkeys(ids)
    for account_id, parent_id, parent_tid in Account.objects.filter(
        product_id=workspace.product_id, id__in=ids, parent__isnull=False
    ).values_list("id", "parent_id", "parent__tracking_id"):
        parents[account_id] = AccountRef(parent_id, parent_tid)
    return parents


@dataclass(frozen=True, slots=True)
class AccountTree:
    """An account's place in the hierarchy: its ancestors (the root first) and its children."""

    ancestors: list[AccountRef]
    children: list[AccountRef]


def account_tree(*, account: Account) -> AccountTree:
    ancestors: list[AccountRef] = []
    parent_id = account.parent_id
    while parent_id is not None and len(ancestors) < MAX_LEVELS:
        parent = Account.objects.filter(id=parent_id).values_list("tracking_id", "parent_id")
        tracking_id, next_id = parent.get()
        ancestors.insert(0, AccountRef(parent_id, tracking_id))
        parent_id = next_id
    children = [
        AccountRef(child_id, tracking_id)
        for child_id, tracking_id in Account.objects.filter(parent_id=account.id)
        .order_by("tracking_id")
        .values_list("id", "tracking_id")
    ]
    return AccountTree(ancestors, children)


def account_subtrees(account_ids: Iterable[int]) -> dict[int, set[int]]:
    """Each account with itself and its descendants, the accounts a parent's figures cover,
    for figures read a page at a time (engagement/period_figures.py, features, activation).
    One query for each level that has children: one when none of them has any."""
    subtrees = {account_id: {account_id} for account_id in account_ids}
    level = {account_id: {account_id} for account_id in subtrees}  # account -> its roots
    for _ in range(MAX_LEVELS):
        below: dict[int, set[int]] = {}
        for child, parent in Account.objects.filter(parent_id__in=list(level)).values_list(
            "id", "parent_id"
        ):
            for root in level[parent]:
                subtrees[root].add(child)
            below.setdefault(child, set()).update(level[parent])
        if not below:
            break
        level = below
    return subtrees


def lineage_query(product: str) -> str:
    """SELECT account_id, ancestor_id: each account of the product with itself and each of its
    ancestors, as one recursive query (`product` is its placeholder, "%s" or "%(product)s").
    The depth bound keeps a damaged table from looping; read it with DISTINCT for the same
    reason. The refresh keeps it as eds_t_lineage; segment event conditions read it inline."""
    # Fixed names and a constant; the product is the caller's placeholder.
    return f"""
        WITH RECURSIVE up (account_id, ancestor_id, depth) AS (
            SELECT id, id, 0 FROM engagement_account WHERE product_id = {product}
            UNION ALL
            SELECT up.account_id, a.parent_id, up.depth + 1
            FROM up JOIN engagement_account a ON a.id = up.ancestor_id
            WHERE a.parent_id IS NOT NULL AND up.depth < {MAX_LEVELS})
        SELECT DISTINCT account_id, ancestor_id FROM up
    """  # noqa: S608


def lineage_around_query(accounts: str) -> str:
    """SELECT account_id, ancestor_id like lineage_query, but only the pairs whose ancestor is
    one of the accounts of table `accounts` (account_id) or one of their ancestors: what an
    incremental refresh of those accounts reads (their ancestors, and each ancestor's
    descendants), a few rows where the product's whole lineage may be hundreds of thousands."""
    # Fixed names and a constant; `accounts` is a temporary table the caller filled.
    return f"""
        WITH RECURSIVE up (account_id, depth) AS (
            SELECT account_id, 0 FROM {accounts}
            UNION ALL
            SELECT a.parent_id, up.depth + 1
            FROM up JOIN engagement_account a ON a.id = up.account_id
            WHERE a.parent_id IS NOT NULL AND up.depth < {MAX_LEVELS}),
        down (account_id, ancestor_id, depth) AS (
            SELECT account_id, account_id, 0 FROM up
            UNION ALL
            SELECT a.id, down.ancestor_id, down.depth + 1
            FROM down JOIN engagement_account a ON a.parent_id = down.account_id
            WHERE down.depth < {MAX_LEVELS})
        SELECT DISTINCT account_id, ancestor_id FROM down
    """  # noqa: S608


def product_has_hierarchy(product_id: int) -> bool:
    """Whether any account of the product has a parent (else figures need no roll-up)."""
    return Account.objects.filter(product_id=product_id, parent__isnull=False).exists()
