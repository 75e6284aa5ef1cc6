"""The dashboard's pages: thin views that parse the request, call engagement's selectors and
render a template.

Every page of a workspace derives from WorkspaceView (engagement.scoping, shared with the
automations' pages), which resolves the workspace among the signed-in user's products before the
page runs and hands out accounts, users and segments only through its `scoped_*` methods (shared
with the read API), which filter by that product: another product's id answers 404.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views import View

from dashboard import overview_selectors, record_selectors
from dashboard import selectors as page_selectors
from dashboard.charts import (
    bands_chart,
    day_chart,
    minute_chart,
    score_chart,
    segment_changes_chart,
)
from dashboard.forms import PER_PAGE, AccountListForm, ListForm, UserListForm
from engagement import health, selectors
from engagement.activation import activation_progress
from engagement.features import features_used
from engagement.hierarchy import account_tree
from engagement.history import account_score_history, user_score_history
from engagement.input_rules import posted_id, whole_fault
from engagement.memberships import can_manage_product, workspaces_visible_to
from engagement.models import Segment
from engagement.period_figures import period_figures, recently_scored_events
from engagement.presentation import (
    MARKETPLACE_PREFIX,
    account_last_seen,
    account_name,
    condition_text,
    split_traits,
    trait_text,
    user_last_seen,
    user_name,
)
from engagement.scoping import WorkspaceView
from engagement.score_basis import account_score_basis
from engagement.stored_json import read_conditions

# The score chart's spans, in days: the workspace's window is one of 1, 7, 30.
HISTORY_SPANS = (30, 90, 365)
HEALTH_HOURS = 6
SEGMENT_MEMBERS_PER_PAGE = 50
SEGMENT_CHANGE_DAYS = 30


class SignedInView(LoginRequiredMixin, View):
    """A page for a signed-in user; an anonymous visitor is sent to the sign-in page."""


class HomeView(SignedInView):
    """The product and workspace picker; with a single workspace, that workspace's overview."""

    def get(self, request: HttpRequest) -> HttpResponse:
        workspaces = list(workspaces_visible_to(request.user))
        chosen = request.GET.get("workspace", "")
        if chosen.isdigit() and any(w.id == int(chosen) for w in workspaces):
            return redirect("dashboard:overview", workspace_id=int(chosen))
        if len(workspaces) == 1:
            return redirect("dashboard:overview", workspace_id=workspaces[0].id)
        return render(request, "dashboard/home.html", {"workspaces": workspaces})


def _span(request: HttpRequest) -> int:
    try:
        days = int(request.GET.get("days", HISTORY_SPANS[0]))
    except ValueError:
        return HISTORY_SPANS[0]
    return days if days in HISTORY_SPANS else HISTORY_SPANS[0]


class OverviewView(WorkspaceView):
    template_name = "dashboard/overview.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        summary = overview_selectors.workspace_overview(workspace=self.workspace)
        return self.render(
            {
                "summary": summary,
                "events_chart": day_chart(
                    "events-chart",
                    f"Events per day, last {summary.window_days} days",
                    summary.events_per_day,
                    "Events",
                    empty_text=f"No events in the last {summary.window_days} days.",
                ),
                "bands_chart": bands_chart(summary.bands),
            }
        )


# Traits shown as columns of the account list (and in its export), when an account has them.
TRAIT_COLUMNS = (
    "plan",
    "status",
    f"{MARKETPLACE_PREFIX}licenseType",
    f"{MARKETPLACE_PREFIX}status",
)


class SubjectListView(WorkspaceView):
    """The accounts list and the users list: one search, segment and band filter, sort and pager
    (dashboard.selectors._list_page); a subclass names its target, form and rows' columns."""

    target = ""  # a Segment.Target: "accounts" or "users"
    form_class: type[ListForm] = ListForm
    trait_columns: tuple[str, ...] = ()

    def query(self) -> tuple[ListForm, dict, page_selectors.ListQuery]:
        form = self.form_class(self.request.GET)
        values = form.values()
        query = form.query()
        if query.segment_id is not None:
            segment = self.scoped_segment(query.segment_id)
            if segment.target != self.target:
                raise Http404(f"That segment holds {segment.target}, not {self.target}.")
        return form, values, query

    def list_page(self, query: page_selectors.ListQuery, page: int) -> page_selectors.ListPage:
        raise NotImplementedError

    # HttpResponseBase: a subclass may stream its answer (the CSV export, dashboard/export.py).
    def get(self, request: HttpRequest) -> HttpResponseBase:
        form, values, query = self.query()
        page = self.list_page(query, values["page"])
        params = request.GET.copy()
        params.pop("page", None)
        sort_links = {}
        for name in self.form_class.sorts:
            link = request.GET.copy()
            link.pop("page", None)
            same = values["sort"] == name
            link["sort"] = name
            # A first click orders names A to Z, renewal dates soonest first and figures highest
            # first; a second reverses.
            first = "asc" if name in ("name", "renewal") else "desc"
            flipped = "desc" if first == "asc" else "asc"
            link["order"] = flipped if same and values["order"] == first else first
            sort_links[name] = link.urlencode()
        segments = [
            s
            for s in record_selectors.segments_for_workspace(workspace=self.workspace)
            if s.target == self.target
        ]
        return self.render(
            {
                "form": form,
                "values": values,
                "page": page,
                "rows": [
                    (row, [trait_text(row.trait(n)) for n in self.trait_columns])
                    for row in page.rows
                ],
                "page_offset": (page.page - 1) * page.per_page,
                "query_string": params.urlencode(),
                "sort_links": sort_links,
                "segments": segments,
                "trait_columns": self.trait_columns,
                "filtered": not query.is_plain_ranking,
            }
        )


class AccountListView(SubjectListView):
    template_name = "dashboard/accounts.html"
    target = Segment.Target.ACCOUNTS
    form_class = AccountListForm
    trait_columns = TRAIT_COLUMNS

    def list_page(self, query: page_selectors.ListQuery, page: int) -> page_selectors.ListPage:
        return page_selectors.account_list_page(
            workspace=self.workspace, query=query, page=page, per_page=PER_PAGE
        )


class UserListView(SubjectListView):
    template_name = "dashboard/users.html"
    target = Segment.Target.USERS
    form_class = UserListForm

    def list_page(self, query: page_selectors.ListQuery, page: int) -> page_selectors.ListPage:
        return page_selectors.user_list_page(
            workspace=self.workspace, query=query, page=page, per_page=PER_PAGE
        )


def _subject_context(
    *, workspace, target: str, subject_id: int, found, last_seen, days: int, history, activity
) -> dict:
    """What an account's and a user's page share: score, charts, breakdown, activation, features,
    segments and traits."""
    own, license_ = split_traits(found.traits)
    score = found.score
    ids = [subject_id]
    by_target = {f"{target}_ids": ids}  # account_ids or user_ids
    segments = selectors.segment_memberships_by_target(workspace=workspace, **by_target)
    return {
        "segments": segments.get(subject_id, []),
        "score": score,
        "percentile_rank": found.percentile_rank,
        "period": period_figures(workspace=workspace, target=target, ids=ids)[subject_id],
        "activation": activation_progress(workspace=workspace, target=target, ids=ids)[subject_id],
        "features": features_used(workspace=workspace, target=target, ids=ids)[subject_id],
        "recently_scored_events": recently_scored_events(score.score_breakdown or []),
        "last_seen": last_seen,
        "days": days,
        "spans": HISTORY_SPANS,
        "history_chart": score_chart(history, days),
        "activity_chart": day_chart(
            "activity-chart",
            f"Events per day, last {days} days",
            activity,
            "Events",
            empty_text=f"No events in the last {days} days.",
        ),
        "breakdown": score.score_breakdown or [],
        "own_traits": own,
        "license_traits": license_,
    }


class AccountView(WorkspaceView):
    template_name = "dashboard/account.html"

    def get(self, request: HttpRequest, account_id: int) -> HttpResponse:
        account = self.scoped_account(account_id)
        days = _span(request)
        found = selectors.account_score_get(workspace=self.workspace, account=account)
        shared = _subject_context(
            workspace=self.workspace,
            target="account",
            subject_id=account.id,
            found=found,
            last_seen=account_last_seen(found.score),
            days=days,
            history=account_score_history(
                workspace_id=self.workspace.id, account_id=account.id, days=days
            ),
            activity=record_selectors.account_activity(account=account, days=days),
        )
        tree = account_tree(account=account)
        basis = account_score_basis(found.score)
        if basis.kind == "no_users":  # it has events: "no counted event" would be untrue
            shared["history_chart"] = replace(
                shared["history_chart"],
                empty_text=f"No score in the last {days} days: no users are linked to it.",
            )
        return self.render(
            {
                **shared,
                "account": account,
                "name": account_name(found.traits) or account.tracking_id,
                "users": record_selectors.account_users(workspace=self.workspace, account=account),
                "tree": tree,
                "score_basis": basis.sentence(with_accounts_under=bool(tree.children)),
                # No users, no score: the header says "–" beside the sentence, not a bare 0.
                "unscored": basis.kind != "users_mean",
            }
        )


class UserView(WorkspaceView):
    template_name = "dashboard/user.html"

    def get(self, request: HttpRequest, user_id: int) -> HttpResponse:
        user = self.scoped_user(user_id)
        days = _span(request)
        found = selectors.user_score_get(workspace=self.workspace, user=user)
        shared = _subject_context(
            workspace=self.workspace,
            target="user",
            subject_id=user.id,
            found=found,
            last_seen=user_last_seen(user, found.score),
            days=days,
            history=user_score_history(workspace_id=self.workspace.id, user_id=user.id, days=days),
            activity=record_selectors.user_activity(user=user, days=days),
        )
        return self.render(
            {
                **shared,
                "subject": user,
                "name": user_name(found.traits, user.email) or user.tracking_id,
                "accounts": record_selectors.user_accounts(workspace=self.workspace, user=user),
            }
        )


class SegmentListView(WorkspaceView):
    template_name = "dashboard/segments.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        return self.render(
            {"segments": record_selectors.segments_for_workspace(workspace=self.workspace)}
        )


class SegmentView(WorkspaceView):
    template_name = "dashboard/segment.html"

    def get(self, request: HttpRequest, segment_id: int) -> HttpResponse:
        segment = self.scoped_segment(segment_id)
        try:
            page = int(request.GET.get("page", 1))
        except ValueError:
            page = 1
        # A page past 2**31 would overflow the database's OFFSET: the first page, as for "x".
        page = page if whole_fault(page, least=1) is None else 1
        members = record_selectors.segment_member_rows(
            segment=segment,
            offset=(page - 1) * SEGMENT_MEMBERS_PER_PAGE,
            limit=SEGMENT_MEMBERS_PER_PAGE,
        )
        changes = record_selectors.segment_changes(segment=segment, days=SEGMENT_CHANGE_DAYS)
        pages = max(1, -(-members.total // SEGMENT_MEMBERS_PER_PAGE))
        return self.render(
            {
                "segment": segment,
                "members": members,
                "page": page,
                "pages": pages,
                "changes_chart": segment_changes_chart(
                    changes, target=segment.get_target_display(), days=SEGMENT_CHANGE_DAYS
                ),
                "conditions": [condition_text(c) for c in read_conditions(segment)],
            }
        )


class HealthView(WorkspaceView):
    """Why did my data not arrive: accepted per minute, backlog, drops, keys, connections."""

    template_name = "dashboard/health.html"

    def post(self, request: HttpRequest) -> HttpResponse:
        """A manager sets a key's allowed origins (one a line; empty: any)."""
        if not can_manage_product(request.user, self.product_id):
            raise PermissionDenied("Managers of the product change its keys.")
        key_id = posted_id(request.POST.get("key_id"))
        if key_id is None:
            raise Http404("No such key.")
        try:
            health.key_allowed_origins_set(
                product_id=self.product_id,
                key_id=key_id,
                allowed_origins=request.POST.get("allowed_origins", ""),
            )
        except LookupError as missing:
            raise Http404("No such key.") from missing
        except ValidationError as invalid:
            return self.get(request, key_error=(key_id, " ".join(invalid.messages)))
        return redirect(f"{reverse('dashboard:health', args=[self.workspace.id])}?saved=1#keys")

    def get(self, request: HttpRequest, key_error: tuple[int, str] | None = None) -> HttpResponse:
        now = timezone.now()
        since = now - timedelta(hours=HEALTH_HOURS)
        # The chart's axis ends with the current minute, whole (its bar is not cut in half).
        until = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
        ingestion = health.ingestion_health(
            product_id=self.product_id,
            since=since,
            include_unattributed=request.user.is_superuser,
        )
        chart = None
        if ingestion is not None:
            chart = minute_chart(
                "accepted-chart",
                f"Requests accepted per minute, last {HEALTH_HOURS} hours",
                ingestion.accepted_per_minute,
                since=until - timedelta(hours=HEALTH_HOURS),
                until=until,
                empty_text="No request under this product's keys was applied in the last "
                f"{HEALTH_HOURS} hours.",
            )
        oldest_age = None
        if ingestion and ingestion.backlog.oldest_received_at:
            oldest_age = timezone.now() - ingestion.backlog.oldest_received_at
        return self.render(
            {
                "ingestion": ingestion,
                "accepted_chart": chart,
                "accepted_total": sum(m.requests for m in ingestion.accepted_per_minute)
                if ingestion
                else 0,
                "oldest_age": oldest_age,
                "hours": HEALTH_HOURS,
                "connections": health.connection_health(product_id=self.product_id),
                "manages": can_manage_product(request.user, self.product_id),
                "key_error": key_error,
                "saved": request.GET.get("saved") == "1",
            },
        )
