"""Reads for the dashboard's accounts and users lists, with their search, filters and sorting, one
parameterised query for both (the overview: dashboard.overview_selectors; the pages of one
account, user or segment: dashboard.record_selectors).

Always given a workspace (or a record) the caller has already scoped to the signed-in user's
products; nothing here checks who asks. Names and last-seen times follow
engagement.presentation, as the read API does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, TypedDict

from django.db import transaction
from django.db.models import (
    Count,
    F,
    FilteredRelation,
    Q,
    QuerySet,
    Value,
    Window,
)
from django.db.models.functions import Coalesce, Lower

from dashboard.money import amount_of
from engagement.bands import Band, band_by_key, band_of, is_cold, is_hot
from engagement.models import (
    Account,
    AccountScore,
    SegmentMember,
    User,
    UserScore,
    Workspace,
)
from engagement.presentation import (
    MRR_TRAIT,
    ScoredAccount,
    ScoredUser,
    account_last_seen,
    account_name,
    trait_text,
    user_last_seen,
    user_name,
)
from engagement.ranking import account_counts, user_counts
from engagement.selectors import (
    account_list_ranked,
    score_percentile_ranks,
    user_list_ranked,
)
from engagement.stored_json import read_account_filter, read_traits
from engagement.traits import TraitNumber, TraitText, accounts_admitted

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations
# The account list's total and rank bookmarks are counted over every score row: reused this long
# (a score refresh starts afresh), so paging does not count them again on each page.
LIST_COUNTS_CACHE_SECONDS = 10
# How the accounts (users) list can be ordered, each the name of the annotation it sorts on; ties
# by id. "name" is the stored natural key of the displayed name (User/Account.name_key).
ACCOUNT_SORTS = ("score", "change", "name", "last_seen", "active_users", "mrr", "renewal")
# The account traits of the money columns: monthly recurring revenue (MRR_TRAIT, from
# engagement) and the day the license's maintenance ends, when it renews (ISO date).
RENEWAL_TRAIT = "am.maintenanceEndDate"
# Sorts whose rows without a value (no MRR, no renewal date) come last in either direction.
_SORTS_EMPTY_LAST = ("mrr", "renewal")
USER_SORTS = ("score", "change", "name", "last_seen")

# --- Accounts and users lists ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListQuery:
    """What the accounts (or users) list shows: a search (name, domain or tracking id; a user's
    name, email or tracking id), a segment, a health band, and an order (descending unless
    `ascending`)."""

    search: str = ""
    segment_id: int | None = None
    band: str = ""
    sort: str = "score"
    ascending: bool = False

    @property
    def is_plain_ranking(self) -> bool:
        return not (self.search or self.segment_id or self.band) and (
            self.sort == "score" and not self.ascending
        )


class _ScoredRow:
    """What a list row of either kind says of its score: its band and hot/cold mark
    (engagement/bands.py), and a trait by name."""

    __slots__ = ()
    score: int
    change: int
    traits: dict

    @property
    def heating(self) -> bool:
        return is_hot(self.change)

    @property
    def cooling(self) -> bool:
        return is_cold(self.change)

    @property
    def band(self) -> Band:
        return band_of(self.score)

    def trait(self, name: str) -> object:
        return self.traits.get(name)


class _AccountMoney:
    """What an account row says of its license's money: its MRR and its renewal date."""

    __slots__ = ()
    traits: dict

    @property
    def mrr(self) -> Decimal | None:
        """`am.mrr` to the cent; None when the account has none (or not a number)."""
        return amount_of(self.traits.get(MRR_TRAIT))

    @property
    def renewal(self) -> date | None:
        """The day the license's maintenance ends (`am.maintenanceEndDate`), if a date."""
        value = self.traits.get(RENEWAL_TRAIT)
        try:
            return date.fromisoformat(value[:10]) if isinstance(value, str) else None
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class AccountRow(_ScoredRow, _AccountMoney):
    id: int
    tracking_id: str
    name: str | None
    domain: str
    score: int
    change: int
    active_users: int
    total_users: int
    last_seen: datetime | None
    traits: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UserRow(_ScoredRow):
    id: int
    tracking_id: str
    name: str | None  # engagement.presentation.user_name: name, first and last name, or email
    email: str
    score: int
    change: int
    last_seen: datetime | None
    traits: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ListPage:
    rows: list  # AccountRow or UserRow
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))


def subjects_listed(workspace: Workspace, target: str) -> QuerySet:
    """The workspace's accounts (those its account filter admits) or users (the product's)."""
    if target == "users":
        return User.objects.filter(product_id=workspace.product_id)
    return accounts_admitted(
        Account.objects.filter(product_id=workspace.product_id), read_account_filter(workspace)
    )


# What a search matches, per list: columns (case-insensitive) and traits (lower-cased).
_SEARCH_COLUMNS = {"accounts": ("tracking_id",), "users": ("tracking_id", "email")}
_SEARCH_TRAITS = {"accounts": ("name", "domain"), "users": ("name", "firstName", "lastName")}


def _list_queryset(workspace: Workspace, query: ListQuery, target: str) -> QuerySet:
    """The accounts ("accounts") or users ("users") the query selects, with their score in the
    workspace, in the query's order."""
    sorts = USER_SORTS if target == "users" else ACCOUNT_SORTS
    if query.sort not in sorts:
        raise ValueError(f"unknown sort {query.sort!r}")
    subjects = subjects_listed(workspace, target).annotate(
        ws=FilteredRelation("scores", condition=Q(scores__workspace_id=workspace.id))
    )
    subjects = subjects.annotate(
        score=Coalesce(F("ws__engagement_score"), Value(0)),
        change=Coalesce(F("ws__score_change"), Value(0)),
    )
    if target == "users":
        # The user row's time is written as events are applied; the score row's is a copy.
        subjects = subjects.annotate(seen=Coalesce(F("last_seen_at"), F("ws__last_seen")))
    else:
        subjects = subjects.annotate(
            active_users=Coalesce(F("ws__active_users"), Value(0)),
            total_users=Coalesce(F("ws__total_users"), Value(0)),
            seen=F("ws__last_seen"),
            domain=TraitText("domain", "traits"),
        )
        if query.sort in _SORTS_EMPTY_LAST:
            subjects = subjects.alias(
                mrr=TraitNumber(MRR_TRAIT, "traits"), renewal=TraitText(RENEWAL_TRAIT, "traits")
            )
    subjects = _list_filtered(subjects, query, target)
    if query.sort == "name":
        # Never NULL: no NULLS FIRST/LAST, which would keep the (product, name_key, id) index
        # from giving the order (read forwards, or backwards when descending).
        direction = "" if query.ascending else "-"
        return subjects.order_by(f"{direction}name_key", f"{direction}id")
    sorted_by = F("seen" if query.sort == "last_seen" else query.sort)
    if query.sort in _SORTS_EMPTY_LAST:
        # No MRR (renewal date) is not the least of them: last whichever the direction.
        direction = "asc" if query.ascending else "desc"
        tie = "id" if query.ascending else "-id"
        return subjects.order_by(getattr(sorted_by, direction)(nulls_last=True), tie)
    if query.ascending:
        order = sorted_by.asc(nulls_first=True)
        tie = "id"
    else:
        order = sorted_by.desc(nulls_last=True)
        tie = "id" if query.sort == "score" else "-id"
    return subjects.order_by(order, tie)


def _list_filtered(subjects: QuerySet, query: ListQuery, target: str) -> QuerySet:
    """The subjects the query's search, segment and band keep."""
    term = query.search.strip().lower()
    if term:
        lowered = {
            f"{name}_lower": Lower(TraitText(name, "traits")) for name in _SEARCH_TRAITS[target]
        }
        matches = Q()
        for column in _SEARCH_COLUMNS[target]:
            matches |= Q(**{f"{column}__icontains": term})
        for alias in lowered:
            matches |= Q(**{f"{alias}__contains": term})
        subjects = subjects.alias(**lowered).filter(matches)
    if query.segment_id is not None:
        members = SegmentMember.objects.filter(segment_id=query.segment_id)
        key = "user_id" if target == "users" else "account_id"
        subjects = subjects.filter(id__in=members.values(key))
    band = band_by_key(query.band)
    if band is not None:
        subjects = subjects.filter(score__gte=band.floor, score__lte=band.ceiling)
    return subjects


class _ListedAccount(TypedDict):
    """What _list_queryset annotates an account with."""

    domain: str | None
    score: int
    change: int
    active_users: int
    total_users: int
    seen: datetime | None


class _ListedUser(TypedDict):
    """What _list_queryset annotates a user with."""

    score: int
    change: int
    seen: datetime | None


def _account_row(account: WithAnnotations[Account, _ListedAccount]) -> AccountRow:
    traits = read_traits(account)
    return AccountRow(
        id=account.id,
        tracking_id=account.tracking_id,
        name=account_name(traits),
        domain=account.domain or "",
        score=account.score,
        change=account.change,
        active_users=account.active_users,
        total_users=account.total_users,
        last_seen=account.seen,
        traits=traits,
    )


def _user_row(user: WithAnnotations[User, _ListedUser]) -> UserRow:
    traits = read_traits(user)
    return UserRow(
        id=user.id,
        tracking_id=user.tracking_id,
        name=user_name(traits, user.email),
        email=user.email,
        score=user.score,
        change=user.change,
        last_seen=user.seen,
        traits=traits,
    )


def _ranked_account_row(found: ScoredAccount) -> AccountRow:
    score = found.score
    return AccountRow(
        id=found.account.id,
        tracking_id=found.account.tracking_id,
        name=account_name(found.traits),
        domain=trait_text(found.traits.get("domain")),
        score=score.engagement_score,
        change=score.score_change,
        active_users=score.active_users,
        total_users=score.total_users,
        last_seen=account_last_seen(score),
        traits=found.traits,
    )


def _ranked_user_row(found: ScoredUser) -> UserRow:
    score = found.score
    return UserRow(
        id=found.user.id,
        tracking_id=found.user.tracking_id,
        name=user_name(found.traits, found.user.email),
        email=found.user.email,
        score=score.engagement_score,
        change=score.score_change,
        last_seen=user_last_seen(found.user, score),
        traits=found.traits,
    )


def account_list_page(
    *, workspace: Workspace, query: ListQuery, page: int, per_page: int
) -> ListPage:
    """One page (from 1) of the workspace's accounts as the query asks (see _list_page)."""
    return _list_page(workspace, query, page, per_page, "accounts")


def user_list_page(*, workspace: Workspace, query: ListQuery, page: int, per_page: int) -> ListPage:
    """One page (from 1) of the workspace's users (every user of its product) as the query
    asks, paged as the accounts list is (see _list_page)."""
    return _list_page(workspace, query, page, per_page, "users")


def _list_page(
    workspace: Workspace, query: ListQuery, page: int, per_page: int, target: str
) -> ListPage:
    """The plain ranking (no search or filter, highest score first) pages through the rank
    index from cached bookmarks, so a deep page costs what the first one does; a segment by
    score leads with the rank index too; a sort by name pages through the (product, name_key,
    id) index; a search or another filter narrows the rows before they are sorted.
    """
    offset = (page - 1) * per_page
    users = target == "users"
    if query.is_plain_ranking:
        ranked = (user_list_ranked if users else account_list_ranked)(
            workspace=workspace,
            offset=offset,
            limit=per_page,
            counts_cache_seconds=LIST_COUNTS_CACHE_SECONDS,
        )
        rows = [
            _ranked_user_row(item) if isinstance(item, ScoredUser) else _ranked_account_row(item)
            for item in ranked.items
        ]
        return ListPage(rows=rows, total=ranked.total, page=page, per_page=per_page)
    if query.segment_id is not None and not query.search.strip() and query.sort == "score":
        return _segment_page(workspace, query, page, per_page, target)
    subjects = _list_queryset(workspace, query, target)
    if query.search.strip():
        # A search reads every name: the total is counted in that same scan rather than in a
        # second one.
        found = list(subjects.annotate(matched=Window(Count("id")))[offset : offset + per_page])
        total = found[0].matched if found else (subjects.count() if offset else 0)
    else:
        if query.segment_id is None and not query.band:
            # Every account (user) of the workspace in another order: the cached total of the
            # plain ranking, not a count of a million rows on each page.
            total = _cached_total(workspace, target)
        else:
            total = subjects.count()
        found = list(subjects[offset : offset + per_page])
    to_row = _user_row if users else _account_row
    return ListPage(rows=[to_row(s) for s in found], total=total, page=page, per_page=per_page)


def _cached_total(workspace: Workspace, target: str) -> int:
    if target == "users":
        return user_counts(workspace, LIST_COUNTS_CACHE_SECONDS)[1]
    return account_counts(workspace, LIST_COUNTS_CACHE_SECONDS)[2]


def _segment_page(
    workspace: Workspace, query: ListQuery, page: int, per_page: int, target: str
) -> ListPage:
    """A segment's members by score. Members are subjects the workspace has scored (segments
    select among score rows), so the rank index leads and each row is checked for membership:
    the first pages of a segment of 25,000 read a few dozen index entries, not every member."""
    assert query.segment_id is not None  # _list_page asks for a segment's page only
    key, relation = ("user_id", "user") if target == "users" else ("account_id", "account")
    score_model = UserScore if target == "users" else AccountScore
    members = SegmentMember.objects.filter(segment_id=query.segment_id).values(key)
    scores = score_model.objects.filter(workspace_id=workspace.id, **{f"{key}__in": members})
    band = band_by_key(query.band)
    if band is not None:
        scores = scores.filter(engagement_score__gte=band.floor, engagement_score__lte=band.ceiling)
    direction = "" if query.ascending else "-"
    offset = (page - 1) * per_page
    found = scores.select_related(relation).order_by(f"{direction}engagement_score", key)
    rows: list[UserRow | AccountRow] = []
    ranks = score_percentile_ranks(workspace_id=workspace.id, kind=relation)
    for score in found[offset : offset + per_page]:
        subject, rank = getattr(score, relation), ranks[score.engagement_score]
        if isinstance(score, UserScore):
            rows.append(_ranked_user_row(ScoredUser(subject, read_traits(subject), score, rank)))
        else:
            account = ScoredAccount(subject, read_traits(subject), score, rank)
            rows.append(_ranked_account_row(account))
    return ListPage(rows=rows, total=scores.count(), page=page, per_page=per_page)


def account_list_all(
    *, workspace: Workspace, query: ListQuery, chunk: int = 2000
) -> Iterator[AccountRow]:
    """Every account the query selects, in its order (for an export)."""
    # In a transaction: on PostgreSQL the chunks come from a server-side cursor, which outside
    # one Django declares WITH HOLD, and a held cursor outlives its transaction: behind a
    # transaction pooler the next FETCH may reach a server session that never declared it.
    with transaction.atomic():
        for account in _list_queryset(workspace, query, "accounts").iterator(chunk_size=chunk):
            yield _account_row(account)
