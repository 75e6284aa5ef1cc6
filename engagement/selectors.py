"""Reads of the engagement domain: what the read API serves, always scoped to one product.

Scores are precomputed (UserScore, AccountScore). An account or user the scoring engine has not
reached yet answers with zeros: it gets an unsaved score row whose fields are all defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from django.db.models import Count, Exists, OuterRef, QuerySet, TextField
from django.db.models.functions import Cast, Lower

from engagement.models import (
    Account,
    AccountScore,
    ScoringState,
    Segment,
    SegmentMember,
    User,
    UserScore,
    Workspace,
)
from engagement.presentation import ScoredAccount, ScoredUser
from engagement.ranking import (
    account_counts,
    accounts_in_workspace,
    ranked_window,
    unscored_accounts,
    user_counts,
)
from engagement.scoring.figures import kept_account_scores
from engagement.scoring.ranks import workspace_percentile_ranks
from engagement.stored_json import (
    json_for_reading,
    read_account_filter,
    read_traits,
    with_json_as_text,
)
from engagement.traits import TraitText
from engagement.workspace_cache import cached_for_workspace, with_scores_refreshed_at

T = TypeVar("T")

USER_MATCH_TYPES = ("email", "tracking_id")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One window of an ordered result and the size of the whole result."""

    items: list[T]
    total: int


@dataclass(frozen=True, slots=True)
class WorkspaceStats:
    """A workspace at a glance: its users and accounts (scored or not yet), the active ones, and
    its scored accounts per engagement score (index 0-100)."""

    users: int
    accounts: int
    active_users: int
    active_accounts: int
    account_scores: tuple[int, ...]


# --- Workspaces -------------------------------------------------------------------------------


def _workspaces(product_id: int) -> QuerySet[Workspace]:
    """The product's workspaces, each with `scores_refreshed_at` (its last score refresh)."""
    workspaces = with_scores_refreshed_at(Workspace.objects.filter(product_id=product_id))
    return with_json_as_text(workspaces, "account_filter")


def workspace_list_for_product(*, product_id: int) -> QuerySet[Workspace]:
    return _workspaces(product_id).prefetch_related("weights").order_by("id")


def workspace_get_for_product(*, product_id: int, workspace_id: int) -> Workspace | None:
    return _workspaces(product_id).filter(id=workspace_id).first()


def workspace_default_for_product(*, product_id: int) -> Workspace | None:
    """The product's first workspace: the one it was created with."""
    return _workspaces(product_id).order_by("id").first()


def workspace_stats(*, workspace: Workspace, counts_cache_seconds: int = 0) -> WorkspaceStats:
    """How many users and accounts the workspace covers (every user of the product; every
    account its filter admits, scored or not yet), how many are active, and the scored accounts
    per score: the figures each score refresh keeps, plus what was created or changed since."""

    def compute() -> WorkspaceStats:
        state = ScoringState.objects.filter(workspace_id=workspace.id).first() or ScoringState(
            workspace_id=workspace.id
        )
        since = state.counted_through
        users = state.product_users + _created_since(User, workspace, since).count()
        if read_account_filter(workspace):
            # Every account the filter admits has a score row once a refresh has read it.
            unscored = unscored_accounts(workspace)
            if since is not None:
                unscored = unscored.filter(updated_at__gt=since)
            accounts = state.scored_accounts + unscored.count()
        else:
            accounts = state.product_accounts + _created_since(Account, workspace, since).count()
        return WorkspaceStats(
            users=max(users, state.scored_users),
            accounts=max(accounts, state.scored_accounts),
            active_users=state.active_users,
            active_accounts=state.active_accounts,
            account_scores=tuple(kept_account_scores(state)),
        )

    return cached_for_workspace("stats", workspace, compute, counts_cache_seconds)


def _created_since(
    model: type[User] | type[Account], workspace: Workspace, since: datetime | None
) -> QuerySet:
    """The product's users (or accounts) created after `since` (None: all of them). A row is
    created with updated_at equal to created_at, so the updated_at index finds the recent ones."""
    rows = model.objects.filter(product_id=workspace.product_id)
    if since is None:
        return rows
    return rows.filter(updated_at__gt=since, created_at__gt=since)


# --- Accounts and users alike ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Kind:
    """What the reads of accounts and of users differ by: the models and the read's class."""

    relation: str  # "account" or "user": the score row's field, and the key's name
    model: type[Account] | type[User]
    score_model: type[AccountScore] | type[UserScore]
    # ScoredAccount or ScoredUser: called with this kind's model, traits, score row and rank,
    # which a union of the two classes' own signatures cannot pair up.
    scored: Callable[[Any, dict, Any, float | None], ScoredAccount | ScoredUser]


_ACCOUNTS = _Kind("account", Account, AccountScore, ScoredAccount)
_USERS = _Kind("user", User, UserScore, ScoredUser)


def score_percentile_ranks(*, workspace_id: int, kind: str) -> tuple[float | None, ...]:
    """The percentile rank of each engagement score 0-100 (indexed by score) among the
    workspace's users (`kind` "user") or accounts ("account"); None for a score of 0. Ranks are
    not stored on the score rows: they are read from the histogram the last refresh kept."""
    return workspace_percentile_ranks(workspace_id, kind)


def _ranks(workspace: Workspace, kind: _Kind) -> tuple[float | None, ...]:
    return score_percentile_ranks(workspace_id=workspace.id, kind=kind.relation)


def _scored(rows: QuerySet, kind: _Kind, ranks: tuple[float | None, ...]) -> list:
    """Score rows with their account (or user), its traits, selected as text, and its rank."""
    relation = kind.relation
    rows = rows.select_related(relation).defer(f"{relation}__traits")
    rows = rows.annotate(subject_traits_json=Cast(f"{relation}__traits", TextField()))
    found = []
    for row in rows:
        traits = json_for_reading(row.subject_traits_json)
        subject = getattr(row, relation)
        traits = traits if isinstance(traits, dict) else {}
        found.append(kind.scored(subject, traits, row, ranks[row.engagement_score]))
    return found


def _zero_score(workspace: Workspace, kind: _Kind, subject: Account | User) -> Any:
    """The account (or user) with an unsaved score row of zeros (and so no rank)."""
    row = kind.score_model(workspace=workspace, **{kind.relation: subject})
    return kind.scored(subject, read_traits(subject), row, None)


def _score_get(workspace: Workspace, kind: _Kind, subject: Account | User) -> Any:
    """The account (or user) with its score row in the workspace (zeros if none)."""
    found = _zero_score(workspace, kind, subject)
    key = {f"{kind.relation}_id": subject.id}
    row = kind.score_model.objects.filter(workspace_id=workspace.id, **key).first()
    if row is None:
        return found
    setattr(row, kind.relation, subject)
    rank = _ranks(workspace, kind)[row.engagement_score]
    return kind.scored(subject, found.traits, row, rank)


def _with_scores(
    workspace: Workspace, kind: _Kind, subjects: QuerySet, offset: int, limit: int
) -> Page:
    """A window of `subjects` (ordered) with their score rows, and the size of the whole."""
    total = subjects.count()
    page = list(with_json_as_text(subjects, "traits")[offset : offset + limit])
    key = f"{kind.relation}_id"
    rows = {
        getattr(row, key): row
        for row in kind.score_model.objects.filter(
            workspace_id=workspace.id, **{f"{key}__in": [subject.id for subject in page]}
        )
    }
    ranks = _ranks(workspace, kind) if rows else ()
    items = []
    for subject in page:
        found = _zero_score(workspace, kind, subject)
        row = rows.get(subject.id)
        if row is not None:
            setattr(row, kind.relation, subject)
            found = kind.scored(subject, found.traits, row, ranks[row.engagement_score])
        items.append(found)
    return Page(items=items, total=total)


def _get_for_product(kind: _Kind, product_id: int, subject_id: int) -> Any:
    """The account (or user), its traits selected as text (`traits_json`) for _score_get."""
    subjects = kind.model.objects.filter(product_id=product_id, id=subject_id)
    return with_json_as_text(subjects, "traits").first()


def _by_rank(found: list, kind: _Kind) -> list:
    """Scored accounts (or users) by engagement score, highest first, ties by id."""
    key = f"{kind.relation}_id"
    return sorted(found, key=lambda row: (-row.score.engagement_score, getattr(row, key)))


def _list_ranked(
    workspace: Workspace,
    kind: _Kind,
    *,
    counts: tuple[int, int, bool],
    unscored: QuerySet,
    offset: int,
    limit: int,
    counts_cache_seconds: int,
) -> Page:
    """A window of the workspace's accounts (or users) by rank: the scored ones by score, then
    the `unscored` ones (a query of them) by id with a score of zeros. `counts`: how many are
    scored, how many there are in all, and whether any is not scored yet."""
    scored, total, any_unscored = counts
    items: list = []
    if offset < scored:
        key = f"{kind.relation}_id"
        window = ranked_window(
            kind.score_model, key, workspace, offset, limit, counts_cache_seconds
        )
        rows = kind.score_model.objects.filter(workspace_id=workspace.id, **{f"{key}__in": window})
        items = _by_rank(_scored(rows, kind, _ranks(workspace, kind)), kind)
    remaining = limit - len(items)
    if remaining > 0 and any_unscored and offset + limit > scored:
        start = max(offset - scored, 0)
        page = with_json_as_text(unscored, "traits").order_by("id")[start : start + remaining]
        items += [_zero_score(workspace, kind, subject) for subject in page]
    return Page(items=items, total=total)


# --- Accounts ---------------------------------------------------------------------------------


def account_list_ranked(
    *, workspace: Workspace, offset: int, limit: int, counts_cache_seconds: int = 0
) -> Page[ScoredAccount]:
    """Accounts by engagement score (highest first, ties by id); not yet scored ones last, by id,
    with a score of zeros. The total and the rank bookmarks of deep pages are cached for
    `counts_cache_seconds`, the staleness the caller accepts (0: always counted).
    """
    scored, unscored, total = account_counts(workspace, counts_cache_seconds)
    return _list_ranked(
        workspace,
        _ACCOUNTS,
        counts=(scored, total, bool(unscored)),
        unscored=unscored_accounts(workspace),
        offset=offset,
        limit=limit,
        counts_cache_seconds=counts_cache_seconds,
    )


def account_children_ranked(
    *, workspace: Workspace, parent_id: int, offset: int, limit: int
) -> Page[ScoredAccount]:
    """The accounts right under `parent_id` (engagement/hierarchy), ranked as
    account_list_ranked ranks all of them; an account has few children, so all are read."""
    children = accounts_in_workspace(workspace).filter(parent_id=parent_id)
    rows = AccountScore.objects.filter(workspace_id=workspace.id, account__in=children)
    items = _by_rank(_scored(rows, _ACCOUNTS, _ranks(workspace, _ACCOUNTS)), _ACCOUNTS)
    scored = {row.account_id for row in items}
    unscored = with_json_as_text(children.exclude(id__in=scored), "traits").order_by("id")
    items += [_zero_score(workspace, _ACCOUNTS, account) for account in unscored]
    return Page(items=items[offset : offset + limit], total=len(items))


def account_get_for_product(*, product_id: int, account_id: int) -> Account | None:
    """The account, its traits selected as text (`traits_json`) for account_score_get."""
    return _get_for_product(_ACCOUNTS, product_id, account_id)


def account_score_get(*, workspace: Workspace, account: Account) -> ScoredAccount:
    """The account with its score row in the workspace (an unsaved row of zeros if none)."""
    return _score_get(workspace, _ACCOUNTS, account)


def account_find(
    *, workspace: Workspace, match_type: str, match_value: str, offset: int, limit: int
) -> Page[ScoredAccount]:
    """Accounts of the workspace's product whose domain, name, tracking id or trait matches.

    domain and name compare case-insensitively with the trait of that name; tracking_id exactly;
    any other match_type is a trait name whose value (as text: a number or boolean matches its
    text) must equal match_value. A trait name is one key, whatever its characters ("0", "a__b").
    """
    accounts = Account.objects.filter(product_id=workspace.product_id)
    if match_type == "tracking_id":
        accounts = accounts.filter(tracking_id=match_value)
    elif match_type in ("domain", "name"):
        accounts = accounts.alias(matched=Lower(TraitText(match_type, "traits"))).filter(
            matched=match_value.strip().lower()
        )
    else:
        trait = TraitText(match_type, "traits")
        accounts = accounts.alias(matched=trait).filter(matched=match_value)
    return _with_scores(workspace, _ACCOUNTS, accounts.order_by("id"), offset, limit)


def account_get_page(*, workspace: Workspace, account_id: int) -> Page[ScoredAccount]:
    """The one account with this id (a page of one, or empty), for the legacy lookup."""
    accounts = Account.objects.filter(product_id=workspace.product_id, id=account_id)
    return _with_scores(workspace, _ACCOUNTS, accounts, 0, 1)


# --- Users ------------------------------------------------------------------------------------


def user_list_ranked(
    *, workspace: Workspace, offset: int, limit: int, counts_cache_seconds: int = 0
) -> Page[ScoredUser]:
    """Users by engagement score (highest first, ties by id); not yet scored ones last, by id.

    Caches its total and rank bookmarks as account_list_ranked does.
    """
    scored, total = user_counts(workspace, counts_cache_seconds)
    has_score = UserScore.objects.filter(workspace_id=workspace.id, user_id=OuterRef("pk"))
    return _list_ranked(
        workspace,
        _USERS,
        counts=(scored, total, total > scored),
        unscored=User.objects.filter(product_id=workspace.product_id).filter(~Exists(has_score)),
        offset=offset,
        limit=limit,
        counts_cache_seconds=counts_cache_seconds,
    )


def user_get_by_match(
    *, workspace: Workspace, match_type: str, match_value: str, offset: int, limit: int
) -> Page[ScoredUser]:
    """Users of the workspace's product with this email or tracking id (exact match)."""
    users = User.objects.filter(product_id=workspace.product_id)
    if match_type == "email":
        users = users.filter(email=match_value)
    else:
        users = users.filter(tracking_id=match_value)
    return _with_scores(workspace, _USERS, users.order_by("id"), offset, limit)


def user_get_for_product(*, product_id: int, user_id: int) -> User | None:
    """The user, their traits selected as text (`traits_json`) for user_score_get."""
    return _get_for_product(_USERS, product_id, user_id)


def user_score_get(*, workspace: Workspace, user: User) -> ScoredUser:
    """The user with their score row in the workspace (an unsaved row of zeros if none)."""
    return _score_get(workspace, _USERS, user)


# --- Segments ---------------------------------------------------------------------------------


def segment_list_for_workspace(*, workspace: Workspace, offset: int, limit: int) -> Page[Segment]:
    segments = Segment.objects.filter(workspace_id=workspace.id)
    total = segments.count()
    items = list(
        with_json_as_text(segments, "conditions")
        .annotate(member_count=Count("members"))
        .order_by("-builtin", "id")[offset : offset + limit]
    )
    return Page(items=items, total=total)


def segment_get_for_product(*, product_id: int, segment_id: int) -> Segment | None:
    segments = Segment.objects.filter(workspace__product_id=product_id, id=segment_id)
    return (
        with_json_as_text(segments, "conditions")
        .select_related("workspace")
        .defer("workspace__account_filter")  # a member list needs the workspace's id only
        .annotate(member_count=Count("members"))
        .first()
    )


def segment_member_list(*, segment: Segment, offset: int, limit: int) -> Page[SegmentMember]:
    """Current members, most recently joined first (ties by member id)."""
    members = SegmentMember.objects.filter(segment_id=segment.id)
    total = members.count()
    items = list(
        members.select_related("account", "user")
        .defer("account__traits", "user__traits")  # a member is listed without its traits
        .order_by("-joined_at", "id")[offset : offset + limit]
    )
    return Page(items=items, total=total)


def segment_memberships_by_target(
    *,
    workspace: Workspace,
    account_ids: list[int] | None = None,
    user_ids: list[int] | None = None,
) -> dict[int, list[SegmentMember]]:
    """The workspace's segments these accounts (or users) are in now, with when they joined,
    keyed by account (or user) id: one query for a whole page."""
    if account_ids is not None:
        members = SegmentMember.objects.filter(account_id__in=account_ids)
        key = "account_id"
    else:
        members = SegmentMember.objects.filter(user_id__in=user_ids or [])
        key = "user_id"
    found: dict[int, list[SegmentMember]] = {}
    for member in (
        members.filter(segment__workspace_id=workspace.id)
        .select_related("segment")
        .order_by("segment_id")
    ):
        found.setdefault(getattr(member, key), []).append(member)
    return found
