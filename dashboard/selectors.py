"""Reads for the dashboard: a workspace at a glance, and the accounts and users lists with their
search, filters and sorting, one parameterised query for both (the pages of one account, user
or segment: dashboard.record_selectors).

Always given a workspace (or a record) the caller has already scoped to the signed-in user's
products; nothing here checks who asks. Names and last-seen times follow
engagement.presentation, as the read API does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any, TypedDict

from django.db import transaction
from django.db.models import (
    Case,
    Count,
    F,
    FilteredRelation,
    Q,
    QuerySet,
    Sum,
    TextField,
    Value,
    When,
    Window,
)
from django.db.models.functions import Cast, Coalesce, Lower
from django.utils import timezone

from dashboard.money import amount_of
from engagement.bands import BANDS, Band, band_by_key, band_of, is_cold, is_hot
from engagement.builtin_segments import (
    RENEWAL_AT_RISK,
    RENEWAL_AT_RISK_CONDITIONS,
    RENEWAL_DAYS,
)
from engagement.models import (
    Account,
    AccountScore,
    EventDayTally,
    Segment,
    SegmentMember,
    User,
    UserScore,
    Workspace,
)
from engagement.presentation import (
    ScoredAccount,
    ScoredUser,
    account_last_seen,
    account_name,
    trait_text,
    user_last_seen,
    user_name,
)
from engagement.ranking import account_counts, user_counts
from engagement.segments import score_rows_matching
from engagement.selectors import (
    WorkspaceStats,
    account_list_ranked,
    user_list_ranked,
    workspace_stats,
)
from engagement.stored_json import json_for_reading, read_account_filter, read_traits
from engagement.traits import TraitNumber, TraitText, accounts_admitted
from engagement.workspace_cache import cached_for_workspace

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

# The overview (the figures each score refresh keeps, the event tallies, the movers) is cached
# this long, about as often as scores refresh; a score refresh or a change of the workspace's
# settings starts afresh (engagement/workspace_cache.py).
OVERVIEW_CACHE_SECONDS = 60
# The account list's total and rank bookmarks are counted over every score row: reused this long
# (a score refresh starts afresh), so paging does not count them again on each page.
LIST_COUNTS_CACHE_SECONDS = 10
TOP_EVENTS = 10
TOP_MOVERS = 5
# How the accounts (users) list can be ordered, each the name of the annotation it sorts on; ties
# by id. "name" is the stored natural key of the displayed name (User/Account.name_key).
ACCOUNT_SORTS = ("score", "change", "name", "last_seen", "active_users", "mrr", "renewal")
# The account traits of the money columns: monthly recurring revenue in USD (a JSON number, set
# by the Marketplace sync) and the day the license's maintenance ends, when it renews (ISO date).
MRR_TRAIT = "am.mrr"
RENEWAL_TRAIT = "am.maintenanceEndDate"
# Sorts whose rows without a value (no MRR, no renewal date) come last in either direction.
_SORTS_EMPTY_LAST = ("mrr", "renewal")
USER_SORTS = ("score", "change", "name", "last_seen")


def _today() -> date:
    return timezone.now().date()


def days_ending_today(days: int, today: date | None = None) -> list[date]:
    """The `days` days ending today, oldest first."""
    today = today or _today()
    return [today - timedelta(days=offset) for offset in range(days - 1, -1, -1)]


# --- Workspace overview -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DayCount:
    day: date
    count: int


@dataclass(frozen=True, slots=True)
class Mover:
    account_id: int
    tracking_id: str
    name: str | None
    score: int
    change: int


@dataclass(frozen=True, slots=True)
class MoneyFigure:
    """A sum of MRR, to the cent, and how many accounts it is of. `amount` is None when none
    of them has an MRR (shown "–", never "$0"). For the total and the bands `accounts` counts
    the accounts with an MRR; for the MRR at risk, every account at risk."""

    amount: Decimal | None
    accounts: int


@dataclass(frozen=True, slots=True)
class Revenue:
    """The workspace's MRR (the `am.mrr` trait of its accounts): in all, per health band
    (lowest band first, as `WorkspaceOverview.bands`), and of the accounts whose active
    commercial license renews within RENEWAL_DAYS days while their score is low or falling:
    the members of its segment "Renewal at risk" (`segment_id`), or, when it no longer has a
    segment of that name (None), the accounts the built-in conditions hold for."""

    total: MoneyFigure
    bands: list[tuple[str, MoneyFigure]]
    at_risk: MoneyFigure
    at_risk_days: int | None  # None: the workspace edited its segment's conditions
    segment_id: int | None


@dataclass(frozen=True, slots=True)
class WorkspaceOverview:
    accounts: int
    users: int
    active_accounts: int
    active_users: int
    bands: list[tuple[str, int]]  # (label, accounts)
    events_per_day: list[DayCount]
    top_events: list[tuple[str, int]]
    movers_up: list[Mover]
    movers_down: list[Mover]
    window_days: int
    computed_at: datetime
    revenue: Revenue


def _movers(workspace: Workspace, ordering: str, condition: Q) -> list[Mover]:
    # The names of the few rows found, not of every row sorted.
    rows = list(
        AccountScore.objects.filter(condition, workspace_id=workspace.id)
        .order_by(ordering, "account_id")
        .values("account_id", "engagement_score", "score_change")[:TOP_MOVERS]
    )
    accounts = {
        account["id"]: account
        for account in Account.objects.filter(id__in=[row["account_id"] for row in rows])
        .annotate(traits_json=Cast("traits", TextField()))
        .values("id", "tracking_id", "traits_json")
    }
    return [
        Mover(
            account_id=row["account_id"],
            tracking_id=accounts[row["account_id"]]["tracking_id"],
            name=_name(json_for_reading(accounts[row["account_id"]]["traits_json"])),
            score=row["engagement_score"],
            change=row["score_change"],
        )
        for row in rows
        if row["account_id"] in accounts
    ]


def _name(traits: object) -> str | None:
    return account_name(traits if isinstance(traits, dict) else {})


def _bands(stats: WorkspaceStats) -> list[tuple[str, int]]:
    # Accounts not scored yet score 0: they belong to the lowest band.
    unscored = max(stats.accounts - sum(stats.account_scores), 0)
    return [
        (
            band.label,
            sum(stats.account_scores[band.floor : band.ceiling + 1])
            + (unscored if index == 0 else 0),
        )
        for index, band in enumerate(BANDS)
    ]


def _events(workspace: Workspace, days: list[date]) -> tuple[list[DayCount], list[tuple]]:
    # The product's tallies (a few rows per day and event name), not its rollups (one per user,
    # event name and day): the same sums.
    rows = (
        EventDayTally.objects.filter(product_id=workspace.product_id, day__gte=days[0])
        .values("day", "event_name")
        .annotate(events=Sum("count"))
    )
    per_day: dict[date, int] = {}
    per_event: dict[str, int] = {}
    for row in rows:
        per_day[row["day"]] = per_day.get(row["day"], 0) + row["events"]
        per_event[row["event_name"]] = per_event.get(row["event_name"], 0) + row["events"]
    # An event only erased people sent sums to 0 until the tallies are compacted: not a top event.
    counted = [item for item in per_event.items() if item[1] > 0]
    top = sorted(counted, key=lambda item: (-item[1], item[0]))[:TOP_EVENTS]
    return [DayCount(day, per_day.get(day, 0)) for day in days], top


def _money(amount: float | Decimal | None, accounts: int) -> MoneyFigure:
    if not accounts or amount is None:
        return MoneyFigure(None, accounts)
    exact = amount if isinstance(amount, Decimal) else Decimal(repr(amount))
    return MoneyFigure(exact.quantize(Decimal("0.01"), ROUND_HALF_UP), accounts)


def workspace_revenue(*, workspace: Workspace) -> Revenue:
    """The workspace's MRR in all, by health band and renewing at risk (see Revenue). Accounts
    without an `am.mrr` number have no MRR: they add nothing and are not counted."""
    accounts = _subjects(workspace, "accounts").annotate(
        ws=FilteredRelation("scores", condition=Q(scores__workspace_id=workspace.id))
    )
    # Accounts not scored yet score 0: the lowest band, as in the overview's band chart.
    accounts = accounts.annotate(
        mrr=TraitNumber(MRR_TRAIT, "traits"),
        band_score=Coalesce(F("ws__engagement_score"), Value(0)),
    )
    # One pass, grouped by band: each row's trait read once per aggregate, not once per band.
    # The lowest band also holds scores below 0, the highest those above 100 (band_of).
    band_index = Case(
        *(
            When(band_score__lt=band.floor, then=Value(index - 1))
            for index, band in enumerate(BANDS)
            if index > 0
        ),
        default=Value(len(BANDS) - 1),
    )
    per_band = {
        row["band"]: row
        for row in accounts.filter(mrr__isnull=False)
        .values(band=band_index)
        .annotate(total=Sum("mrr"), with_mrr=Count("*"))
        .order_by()
    }
    no_mrr = {"total": None, "with_mrr": 0}
    bands = [per_band.get(index, no_mrr) for index in range(len(BANDS))]
    # The total is the sum of the bands' sums, added as decimals.
    total = sum((Decimal(repr(b["total"])) for b in bands if b["with_mrr"]), Decimal(0))
    with_mrr = sum(b["with_mrr"] for b in bands)
    # At risk: the members of the workspace's "Renewal at risk" segment (kept by every score
    # refresh, so the figure and the list its link opens agree), read through the member index
    # rather than evaluating the conditions over every account; a workspace that deleted or
    # renamed its segment is evaluated against the built-in conditions.
    segment = (
        Segment.objects.filter(workspace_id=workspace.id, name=RENEWAL_AT_RISK)
        .order_by("-builtin", "id")
        .values("id", "conditions", "match")
        .first()
    )
    segment_id = segment["id"] if segment else None
    as_built = segment is None or (
        segment["conditions"] == RENEWAL_AT_RISK_CONDITIONS and segment["match"] == "all"
    )
    at_risk_ids: QuerySet[Any, int]  # one subquery of account ids: members or score rows
    if segment_id is not None:
        members = SegmentMember.objects.filter(segment_id=segment_id)
        at_risk_ids = members.values_list("account_id", flat=True)
    else:
        at_risk_ids = score_rows_matching(
            workspace_id=workspace.id, target="accounts", conditions=RENEWAL_AT_RISK_CONDITIONS
        ).values_list("account_id", flat=True)
    at_risk = (
        Account.objects.filter(id__in=at_risk_ids)
        .annotate(mrr=TraitNumber(MRR_TRAIT, "traits"))
        .aggregate(total=Sum("mrr"), with_mrr=Count("mrr"), accounts=Count("id"))
    )
    # No account at risk is nothing at risk ($0); accounts at risk none of which has an MRR are
    # an amount not known ("–").
    at_risk_amount = _money(at_risk["total"], at_risk["with_mrr"]).amount
    if not at_risk["accounts"]:
        at_risk_amount = Decimal("0.00")
    return Revenue(
        total=_money(total, with_mrr),
        bands=[
            (band.label, _money(found["total"], found["with_mrr"]))
            for band, found in zip(BANDS, bands, strict=True)
        ],
        at_risk=MoneyFigure(at_risk_amount, at_risk["accounts"]),
        at_risk_days=RENEWAL_DAYS if as_built else None,
        segment_id=segment_id,
    )


def workspace_overview(*, workspace: Workspace) -> WorkspaceOverview:
    """Counts, active counts, the score bands, events per day and the top events of the
    workspace's window, and the accounts whose score moved most since the previous period."""

    def compute() -> WorkspaceOverview:
        stats = workspace_stats(workspace=workspace, counts_cache_seconds=LIST_COUNTS_CACHE_SECONDS)
        events_per_day, top_events = _events(workspace, days_ending_today(workspace.lookback_days))
        return WorkspaceOverview(
            accounts=stats.accounts,
            users=stats.users,
            active_accounts=stats.active_accounts,
            active_users=stats.active_users,
            bands=_bands(stats),
            events_per_day=events_per_day,
            top_events=top_events,
            movers_up=_movers(workspace, "-score_change", Q(score_change__gt=0)),
            movers_down=_movers(workspace, "score_change", Q(score_change__lt=0)),
            window_days=workspace.lookback_days,
            computed_at=timezone.now(),
            revenue=workspace_revenue(workspace=workspace),
        )

    return cached_for_workspace("workspace-overview", workspace, compute, OVERVIEW_CACHE_SECONDS)


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


def _subjects(workspace: Workspace, target: str) -> QuerySet:
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
    subjects = _subjects(workspace, target).annotate(
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
    for score in found[offset : offset + per_page]:
        subject = getattr(score, relation)
        if isinstance(score, UserScore):
            rows.append(_ranked_user_row(ScoredUser(subject, read_traits(subject), score)))
        else:
            rows.append(_ranked_account_row(ScoredAccount(subject, read_traits(subject), score)))
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
