"""Reads of the engagement domain: what the read API serves, always scoped to one product.

Scores are precomputed (UserScore, AccountScore). An account or user the scoring engine has not
reached yet answers with zeros: it gets an unsaved score row whose fields are all defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from django.db import connections, router
from django.db.models import Count, Exists, OuterRef, QuerySet, TextField
from django.db.models.functions import Cast, Lower

from engagement.models import (
    Account,
    AccountScore,
    ScoreFields,
    ScoringState,
    Segment,
    SegmentMember,
    User,
    UserScore,
    Workspace,
)
from engagement.scoring.figures import kept_account_scores
from engagement.segments import TraitText, accounts_admitted
from engagement.stored_json import json_for_reading
from engagement.workspace_cache import (
    cached_for_workspace,
    scores_refreshed_at,
    with_scores_refreshed_at,
)

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


_NOT_SELECTED = object()


def _with_json_as_text(queryset: QuerySet, *fields: str) -> QuerySet:
    """Load these JSON fields (`traits`, or `account__traits` across a relation) as text, not
    decoded: each as `<field>_text` (`account_traits_text`), read back with _read_json."""
    return queryset.defer(*fields).annotate(
        **{f"{field.replace('__', '_')}_text": Cast(field, TextField()) for field in fields}
    )


def _hand_over_text(rows: list, relation: str, field: str = "traits") -> list:
    """Give each row's `<relation>_<field>_text` to its related record, where _read_json looks."""
    for row in rows:
        setattr(getattr(row, relation), f"{field}_text", getattr(row, f"{relation}_{field}_text"))
    return rows


def _read_json(record: object, field: str) -> object:
    """A JSON field as reads render it: from its text when selected as text (a record loaded any
    other way has it decoded already)."""
    text = getattr(record, f"{field}_text", _NOT_SELECTED)
    if text is _NOT_SELECTED:
        return getattr(record, field)
    return json_for_reading(text)


def read_traits(subject: Account | User) -> dict:
    """The traits of an account or user as the read API renders them ({} if not an object)."""
    traits = _read_json(subject, "traits")
    return traits if isinstance(traits, dict) else {}


def read_account_filter(workspace: Workspace) -> dict:
    """A workspace's account filter as reads use it ({} if not an object)."""
    account_filter = _read_json(workspace, "account_filter")
    return account_filter if isinstance(account_filter, dict) else {}


def read_conditions(segment: Segment) -> list[dict]:
    """A segment's conditions as the read API renders them: its objects ([] if not a list)."""
    conditions = _read_json(segment, "conditions")
    if not isinstance(conditions, list):
        return []
    return [condition for condition in conditions if isinstance(condition, dict)]


# --- Workspaces -------------------------------------------------------------------------------


def _workspaces(product_id: int) -> QuerySet[Workspace]:
    """The product's workspaces, each with `scores_refreshed_at` (its last score refresh)."""
    workspaces = with_scores_refreshed_at(Workspace.objects.filter(product_id=product_id))
    return _with_json_as_text(workspaces, "account_filter")


def score_computed_at(*, score: ScoreFields, workspace: Workspace) -> datetime | None:
    """When a score row's values were last computed; None for a row not scored yet.

    Every refresh of a workspace, full or incremental, re-evaluates all of its rows (p90, and
    with it any score, may move) but rewrites only those whose values changed, so a row's own
    write time (`computed_at`) can be much older than the figures it still correctly holds. The
    workspace's last refresh is that time; a row written after it (by hand, an import) keeps its
    own."""
    if score.pk is None:
        return None
    refreshed_at = scores_refreshed_at(workspace)
    if refreshed_at is None or (score.computed_at and score.computed_at > refreshed_at):
        return score.computed_at
    return refreshed_at


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
            unscored = _unscored_accounts(workspace)
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


# --- Accounts ---------------------------------------------------------------------------------


def _accounts_in_workspace(workspace: Workspace) -> QuerySet[Account]:
    """The product's accounts the workspace scores: all of them, or those its filter matches."""
    accounts = Account.objects.filter(product_id=workspace.product_id)
    return accounts_admitted(accounts, read_account_filter(workspace))


def _unscored_accounts(workspace: Workspace) -> QuerySet[Account]:
    scored = AccountScore.objects.filter(workspace_id=workspace.id, account_id=OuterRef("pk"))
    return _accounts_in_workspace(workspace).filter(~Exists(scored))


# A deep page starts from the nearest of these rank positions instead of walking the rank index
# from the top: the rank key at every BOOKMARK_EVERY-th position is cached like the totals.
BOOKMARK_EVERY = 1000

_BOOKMARKS_SQL = """
SELECT engagement_score, {target} FROM (
    SELECT engagement_score, {target},
           ROW_NUMBER() OVER (ORDER BY engagement_score DESC, {target}) - 1 AS position
    FROM {table} WHERE workspace_id = %s
) ranked
WHERE position %% %s = 0
ORDER BY position
"""


def _rank_bookmarks(
    model: type[ScoreFields], target: str, workspace: Workspace, cache_seconds: int
) -> list:
    """[(score, target id)] at rank positions 0, BOOKMARK_EVERY, 2 * BOOKMARK_EVERY, ..."""

    def compute() -> list[tuple[int, int]]:
        # Table and column names come from the model, never from the request.
        sql = _BOOKMARKS_SQL.format(target=target, table=model._meta.db_table)
        # Raw SQL, routed like the ORM's reads (a read replica when one serves the read API).
        with connections[router.db_for_read(model)].cursor() as cursor:
            cursor.execute(sql, [workspace.id, BOOKMARK_EVERY])
            return [tuple(row) for row in cursor.fetchall()]

    key = f"bookmarks:{model._meta.model_name}:{BOOKMARK_EVERY}"
    return cached_for_workspace(key, workspace, compute, cache_seconds)


def _ranked_window(
    model: type[ScoreFields],
    target: str,
    workspace: Workspace,
    offset: int,
    limit: int,
    cache_seconds: int,
) -> QuerySet | list[int]:
    """The target ids (account_id or user_id) at rank positions [offset, offset + limit).

    Near the top: a subquery walking the rank index (an index-only scan), run inside the query
    that reads the rows. Deeper: from the nearest cached bookmark, two short index range scans
    (the rest of the bookmark's score tie, by id; then the lower scores).
    """
    scores = model.objects.filter(workspace_id=workspace.id)
    ranked = scores.order_by("-engagement_score", target)
    if offset < BOOKMARK_EVERY or cache_seconds <= 0:
        return ranked.values(target)[offset : offset + limit]
    bookmarks = _rank_bookmarks(model, target, workspace, cache_seconds)
    index = offset // BOOKMARK_EVERY
    if index >= len(bookmarks):  # the ranking grew shorter since the bookmarks were taken
        return ranked.values(target)[offset : offset + limit]
    score, target_id = bookmarks[index]
    skip = offset - index * BOOKMARK_EVERY
    wanted = skip + limit
    ids = list(
        scores.filter(engagement_score=score, **{f"{target}__gte": target_id})
        .order_by(target)
        .values_list(target, flat=True)[:wanted]
    )
    if len(ids) < wanted:
        ids += list(
            scores.filter(engagement_score__lt=score)
            .order_by("-engagement_score", target)
            .values_list(target, flat=True)[: wanted - len(ids)]
        )
    return ids[skip:]


def _account_parts(workspace: Workspace, cache_seconds: int) -> tuple[int, int, int]:
    """(scored, not yet scored, total) account counts of a workspace.

    Without an account filter every product account belongs to the workspace, so the accounts not
    scored yet are the difference of two cheap counts and the anti-join is skipped.
    """

    def count() -> tuple[int, int, int]:
        scored = AccountScore.objects.filter(workspace_id=workspace.id).count()
        if read_account_filter(workspace):
            unscored = _unscored_accounts(workspace).count()
        else:
            product_total = Account.objects.filter(product_id=workspace.product_id).count()
            unscored = max(product_total - scored, 0)
        return scored, unscored, scored + unscored

    return cached_for_workspace("accounts", workspace, count, cache_seconds)


def account_list_ranked(
    *, workspace: Workspace, offset: int, limit: int, counts_cache_seconds: int = 0
) -> Page[AccountScore]:
    """Accounts by engagement score (highest first, ties by id); not yet scored ones last, by id.

    Each item is the account's score row with `.account` loaded (unsaved and all zeros when the
    engine has not scored the account yet). The total and the rank bookmarks of deep pages are
    cached for `counts_cache_seconds`, the staleness the caller accepts (0: always counted).
    """
    scored, unscored, total = _account_parts(workspace, counts_cache_seconds)
    items: list[AccountScore] = []
    if offset < scored:
        window = _ranked_window(
            AccountScore, "account_id", workspace, offset, limit, counts_cache_seconds
        )
        rows = AccountScore.objects.filter(
            workspace_id=workspace.id, account_id__in=window
        ).select_related("account")
        rows = _hand_over_text(list(_with_json_as_text(rows, "account__traits")), "account")
        items = sorted(rows, key=lambda row: (-row.engagement_score, row.account_id))
    remaining = limit - len(items)
    if remaining > 0 and unscored and offset + limit > scored:
        start = max(offset - scored, 0)
        accounts = _with_json_as_text(_unscored_accounts(workspace), "traits").order_by("id")[
            start : start + remaining
        ]
        items += [_zero_account_score(workspace, account) for account in accounts]
    return Page(items=items, total=total)


def _zero_account_score(workspace: Workspace, account: Account) -> AccountScore:
    return AccountScore(workspace=workspace, account=account)


def account_get_for_product(*, product_id: int, account_id: int) -> Account | None:
    accounts = Account.objects.filter(product_id=product_id, id=account_id)
    return _with_json_as_text(accounts, "traits").first()


def account_score_get(*, workspace: Workspace, account: Account) -> AccountScore:
    """The account's score row in the workspace, or an unsaved row of zeros."""
    row = AccountScore.objects.filter(workspace_id=workspace.id, account_id=account.id).first()
    if row is None:
        return _zero_account_score(workspace, account)
    row.account = account
    return row


def account_find(
    *, workspace: Workspace, match_type: str, match_value: str, offset: int, limit: int
) -> Page[AccountScore]:
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
    return _with_account_scores(workspace, accounts.order_by("id"), offset, limit)


def account_get_page(*, workspace: Workspace, account_id: int) -> Page[AccountScore]:
    """The one account with this id (a page of one, or empty), for the legacy lookup."""
    accounts = Account.objects.filter(product_id=workspace.product_id, id=account_id)
    return _with_account_scores(workspace, accounts, 0, 1)


def _with_account_scores(
    workspace: Workspace, accounts: QuerySet[Account], offset: int, limit: int
) -> Page[AccountScore]:
    total = accounts.count()
    page = list(_with_json_as_text(accounts, "traits")[offset : offset + limit])
    rows = {
        row.account_id: row
        for row in AccountScore.objects.filter(
            workspace_id=workspace.id, account_id__in=[a.id for a in page]
        )
    }
    items = []
    for account in page:
        row = rows.get(account.id) or _zero_account_score(workspace, account)
        row.account = account
        items.append(row)
    return Page(items=items, total=total)


# --- Users ------------------------------------------------------------------------------------


def _user_parts(workspace: Workspace, cache_seconds: int) -> tuple[int, int]:
    """(scored, total) user counts of a workspace: every user of the product belongs to it."""

    def count() -> tuple[int, int]:
        scored = UserScore.objects.filter(workspace_id=workspace.id).count()
        total = User.objects.filter(product_id=workspace.product_id).count()
        return scored, max(total, scored)

    return cached_for_workspace("users", workspace, count, cache_seconds)


def _zero_user_score(workspace: Workspace, user: User) -> UserScore:
    return UserScore(workspace=workspace, user=user)


def user_list_ranked(
    *, workspace: Workspace, offset: int, limit: int, counts_cache_seconds: int = 0
) -> Page[UserScore]:
    """Users by engagement score (highest first, ties by id); not yet scored ones last, by id.

    Caches its total and rank bookmarks as account_list_ranked does.
    """
    scored, total = _user_parts(workspace, counts_cache_seconds)
    items: list[UserScore] = []
    if offset < scored:
        window = _ranked_window(
            UserScore, "user_id", workspace, offset, limit, counts_cache_seconds
        )
        rows = UserScore.objects.filter(
            workspace_id=workspace.id, user_id__in=window
        ).select_related("user")
        rows = _hand_over_text(list(_with_json_as_text(rows, "user__traits")), "user")
        items = sorted(rows, key=lambda row: (-row.engagement_score, row.user_id))
    remaining = limit - len(items)
    if remaining > 0 and total > scored and offset + limit > scored:
        start = max(offset - scored, 0)
        has_score = UserScore.objects.filter(workspace_id=workspace.id, user_id=OuterRef("pk"))
        users = (
            _with_json_as_text(User.objects.filter(product_id=workspace.product_id), "traits")
            .filter(~Exists(has_score))
            .order_by("id")[start : start + remaining]
        )
        items += [_zero_user_score(workspace, user) for user in users]
    return Page(items=items, total=total)


def user_get_by_match(
    *, workspace: Workspace, match_type: str, match_value: str, offset: int, limit: int
) -> Page[UserScore]:
    """Users of the workspace's product with this email or tracking id (exact match)."""
    users = User.objects.filter(product_id=workspace.product_id)
    if match_type == "email":
        users = users.filter(email=match_value)
    else:
        users = users.filter(tracking_id=match_value)
    users = users.order_by("id")
    total = users.count()
    page = list(_with_json_as_text(users, "traits")[offset : offset + limit])
    rows = {
        row.user_id: row
        for row in UserScore.objects.filter(
            workspace_id=workspace.id, user_id__in=[u.id for u in page]
        )
    }
    items = []
    for user in page:
        row = rows.get(user.id) or _zero_user_score(workspace, user)
        row.user = user
        items.append(row)
    return Page(items=items, total=total)


def user_get_for_product(*, product_id: int, user_id: int) -> User | None:
    users = User.objects.filter(product_id=product_id, id=user_id)
    return _with_json_as_text(users, "traits").first()


def user_score_get(*, workspace: Workspace, user: User) -> UserScore:
    """The user's score row in the workspace, or an unsaved row of zeros."""
    row = UserScore.objects.filter(workspace_id=workspace.id, user_id=user.id).first()
    if row is None:
        return _zero_user_score(workspace, user)
    row.user = user
    return row


# --- Segments ---------------------------------------------------------------------------------


def segment_list_for_workspace(*, workspace: Workspace, offset: int, limit: int) -> Page[Segment]:
    segments = Segment.objects.filter(workspace_id=workspace.id)
    total = segments.count()
    items = list(
        _with_json_as_text(segments, "conditions")
        .annotate(member_count=Count("members"))
        .order_by("id")[offset : offset + limit]
    )
    return Page(items=items, total=total)


def segment_get_for_product(*, product_id: int, segment_id: int) -> Segment | None:
    segments = Segment.objects.filter(workspace__product_id=product_id, id=segment_id)
    return (
        _with_json_as_text(segments, "conditions")
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
