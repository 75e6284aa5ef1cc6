"""Reads for the dashboard's overview: a workspace at a glance (its counts, score bands, events
per day, top events and movers) and its revenue (MRR in all, by band and renewing at risk),
cached together per workspace (engagement/workspace_cache.py).

Always given a workspace the caller has already scoped to the signed-in user's products.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

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
)
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from engagement.bands import BANDS
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
    Workspace,
)
from engagement.presentation import (
    MRR_TRAIT,
    account_name,
)
from engagement.segment_matching import score_rows_matching
from engagement.selectors import (
    WorkspaceStats,
    workspace_stats,
)
from engagement.stored_json import json_for_reading
from engagement.traits import TraitNumber
from engagement.workspace_cache import cached_for_workspace

if TYPE_CHECKING:
    pass

from dashboard.selectors import LIST_COUNTS_CACHE_SECONDS, subjects_listed

# The overview (the figures each score refresh keeps, the event tallies, the movers) is cached
# this long, about as often as scores refresh; a score refresh or a change of the workspace's
# settings starts afresh (engagement/workspace_cache.py).
OVERVIEW_CACHE_SECONDS = 60
TOP_EVENTS = 10
TOP_MOVERS = 5


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
    bands = _mrr_by_band(workspace)
    # The total is the sum of the bands' sums, added as decimals.
    total = sum((Decimal(repr(b["total"])) for b in bands if b["with_mrr"]), Decimal(0))
    with_mrr = sum(b["with_mrr"] for b in bands)
    at_risk, segment_id, as_built = _renewal_at_risk(workspace)
    return Revenue(
        total=_money(total, with_mrr),
        bands=[
            (band.label, _money(found["total"], found["with_mrr"]))
            for band, found in zip(BANDS, bands, strict=True)
        ],
        at_risk=at_risk,
        at_risk_days=RENEWAL_DAYS if as_built else None,
        segment_id=segment_id,
    )


def _mrr_by_band(workspace: Workspace) -> list[dict]:
    """Per health band, lowest first: the sum of its accounts' MRR and how many have one."""
    # Only the accounts that have the trait, read through their index (account_with_mrr_idx): a
    # workspace without Marketplace revenue reads none, not every account's traits.
    accounts = (
        subjects_listed(workspace, "accounts")
        .filter(traits__has_key=MRR_TRAIT)
        .annotate(ws=FilteredRelation("scores", condition=Q(scores__workspace_id=workspace.id)))
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
    return [per_band.get(index, no_mrr) for index in range(len(BANDS))]


def _renewal_at_risk(workspace: Workspace) -> tuple[MoneyFigure, int | None, bool]:
    """The MRR of the accounts renewing at risk; the segment that lists them (None: none); and
    whether its conditions are the built-in ones (its days then mean RENEWAL_DAYS).

    At risk: the members of the workspace's "Renewal at risk" segment (kept by every score
    refresh, so the figure and the list its link opens agree), read through the member index
    rather than evaluating the conditions over every account; a workspace that deleted or
    renamed its segment is evaluated against the built-in conditions."""
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
    amount = _money(at_risk["total"], at_risk["with_mrr"]).amount
    if not at_risk["accounts"]:
        amount = Decimal("0.00")
    return MoneyFigure(amount, at_risk["accounts"]), segment_id, as_built


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
