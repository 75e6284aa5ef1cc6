"""The dashboard's pages: thin views that parse the request, call engagement's selectors and
render a template.

Every page of a workspace derives from WorkspaceView, which resolves the workspace among the
signed-in user's products before the page runs and hands out accounts, users and segments only
through its `scoped_*` methods (engagement.scoping, shared with the read API), which filter by
that product: another product's id answers 404.
"""

from __future__ import annotations

import csv
from datetime import timedelta

from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views import View

from dashboard.charts import DAY_MS, Chart, day_chart, day_span, minute_chart, score_chart
from dashboard.forms import PER_PAGE, AccountListForm
from engagement import health, overview, selectors
from engagement.history import account_score_history, user_score_history
from engagement.memberships import product_role, workspace_visible_to, workspaces_visible_to
from engagement.models import Segment, Workspace
from engagement.scoping import ProductScopedView

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


class WorkspaceView(ProductScopedView, SignedInView):
    """Base of every page inside a workspace: the workspace is the signed-in user's or 404
    (engagement.scoping: records through `scoped_*`, another product's id answers 404)."""

    workspace: Workspace
    template_name = ""

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        self.workspace = self.scoped_workspace(kwargs.pop("workspace_id"))
        return super().dispatch(request, *args, **kwargs)

    @property
    def product_id(self) -> int:
        return self.workspace.product_id

    def find_workspace(self, workspace_id: int) -> Workspace | None:
        return workspace_visible_to(self.request.user, workspace_id)

    def not_found(self, what: str, ident: int) -> Http404:
        return Http404(f"No such {what.lower()}.")

    def render(self, context: dict, template: str | None = None) -> HttpResponse:
        base = {
            "workspace": self.workspace,
            "product": self.workspace.product,
            "workspaces": workspaces_visible_to(self.request.user),
            "role": product_role(self.request.user, self.product_id),
        }
        return render(self.request, template or self.template_name, {**base, **context})


def _span(request: HttpRequest) -> int:
    try:
        days = int(request.GET.get("days", HISTORY_SPANS[0]))
    except ValueError:
        return HISTORY_SPANS[0]
    return days if days in HISTORY_SPANS else HISTORY_SPANS[0]


class OverviewView(WorkspaceView):
    template_name = "dashboard/overview.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        summary = overview.workspace_overview(workspace=self.workspace)
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
                "bands_chart": Chart(
                    id="bands-chart",
                    title="Accounts by health band",
                    chart_type="bar",
                    x=[label for label, _ in summary.bands],
                    y=[count for _, count in summary.bands],
                    x_title="Score",
                    y_title="Accounts",
                    empty_text="No accounts yet.",
                ),
            }
        )


class AccountListView(WorkspaceView):
    template_name = "dashboard/accounts.html"

    def query(self) -> tuple[AccountListForm, dict, overview.AccountQuery]:
        form = AccountListForm(self.request.GET)
        values = form.values()
        query = form.query()
        if query.segment_id is not None:
            segment = self.scoped_segment(query.segment_id)
            if segment.target != Segment.Target.ACCOUNTS:
                raise Http404("That segment holds users, not accounts.")
        return form, values, query

    def get(self, request: HttpRequest) -> HttpResponse:
        form, values, query = self.query()
        page = overview.account_list_page(
            workspace=self.workspace, query=query, page=values["page"], per_page=PER_PAGE
        )
        params = request.GET.copy()
        params.pop("page", None)
        sort_links = {}
        for name in overview.ACCOUNT_SORTS:
            link = request.GET.copy()
            link.pop("page", None)
            same = values["sort"] == name
            link["sort"] = name
            link["order"] = "asc" if same and values["order"] == "desc" else "desc"
            sort_links[name] = link.urlencode()
        segments = [
            s
            for s in overview.segments_for_workspace(workspace=self.workspace)
            if s.target == Segment.Target.ACCOUNTS
        ]
        return self.render(
            {
                "form": form,
                "values": values,
                "page": page,
                "rows": [(row, [_shown(row.trait(n)) for n in TRAIT_COLUMNS]) for row in page.rows],
                "page_offset": (page.page - 1) * page.per_page,
                "query_string": params.urlencode(),
                "sort_links": sort_links,
                "segments": segments,
                "trait_columns": TRAIT_COLUMNS,
                "filtered": not query.is_plain_ranking,
            }
        )


# Traits shown as columns of the account list (and in its export), when an account has them.
TRAIT_COLUMNS = ("plan", "status", "am.licenseType", "am.status")


class _Echo:
    def write(self, value: str) -> str:
        return value


class AccountExportView(AccountListView):
    """The account list as it is filtered and sorted, every page, as CSV."""

    def get(self, request: HttpRequest) -> StreamingHttpResponse:
        _, _, query = self.query()
        writer = csv.writer(_Echo())
        header = [
            "id",
            "tracking_id",
            "name",
            "domain",
            "score",
            "change",
            "active_users",
            "total_users",
            "last_seen",
            *TRAIT_COLUMNS,
        ]

        def lines():
            yield writer.writerow(header)
            for row in overview.account_list_all(workspace=self.workspace, query=query):
                traits = [_cell(row.trait(name)) for name in TRAIT_COLUMNS]
                yield writer.writerow(
                    [
                        row.id,
                        _cell(row.tracking_id),
                        _cell(row.name),
                        _cell(row.domain),
                        row.score,
                        row.change,
                        row.active_users,
                        row.total_users,
                        row.last_seen.isoformat() if row.last_seen else "",
                        *traits,
                    ]
                )

        response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
        name = f"accounts-{self.workspace.id}-{timezone.now():%Y%m%d-%H%M}.csv"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response


def _shown(value: object) -> str:
    """A trait value as a cell shows it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    # A cell a spreadsheet would run as a formula is kept as text.
    return "'" + text if text[:1] in ("=", "+", "-", "@") and not _is_number(text) else text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _subject_context(*, traits: dict, score, days: int, history, activity) -> dict:
    """What an account's and a user's page share: score, charts, breakdown and traits."""
    own, license_ = overview.split_traits(traits)
    return {
        "score": score,
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
        "marked": overview.MARKED_CHANGE,
    }


class AccountView(WorkspaceView):
    template_name = "dashboard/account.html"

    def get(self, request: HttpRequest, account_id: int) -> HttpResponse:
        account = self.scoped_account(account_id)
        days = _span(request)
        traits = selectors.read_traits(account)
        shared = _subject_context(
            traits=traits,
            score=selectors.account_score_get(workspace=self.workspace, account=account),
            days=days,
            history=account_score_history(
                workspace_id=self.workspace.id, account_id=account.id, days=days
            ),
            activity=overview.account_activity(account=account, days=days),
        )
        segments = selectors.segment_memberships_by_target(
            workspace=self.workspace, account_ids=[account.id]
        ).get(account.id, [])
        return self.render(
            {
                **shared,
                "account": account,
                "name": traits.get("name") or account.tracking_id,
                "users": overview.account_users(workspace=self.workspace, account=account),
                "segments": segments,
            }
        )


class UserView(WorkspaceView):
    template_name = "dashboard/user.html"

    def get(self, request: HttpRequest, user_id: int) -> HttpResponse:
        user = self.scoped_user(user_id)
        days = _span(request)
        shared = _subject_context(
            traits=selectors.read_traits(user),
            score=selectors.user_score_get(workspace=self.workspace, user=user),
            days=days,
            history=user_score_history(workspace_id=self.workspace.id, user_id=user.id, days=days),
            activity=overview.user_activity(user=user, days=days),
        )
        segments = selectors.segment_memberships_by_target(
            workspace=self.workspace, user_ids=[user.id]
        ).get(user.id, [])
        return self.render(
            {
                **shared,
                "subject": user,
                "name": overview.user_label(user) or user.tracking_id,
                "accounts": overview.user_accounts(workspace=self.workspace, user=user),
                "segments": segments,
            }
        )


class SegmentListView(WorkspaceView):
    template_name = "dashboard/segments.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        return self.render({"segments": overview.segments_for_workspace(workspace=self.workspace)})


class SegmentView(WorkspaceView):
    template_name = "dashboard/segment.html"

    def get(self, request: HttpRequest, segment_id: int) -> HttpResponse:
        segment = self.scoped_segment(segment_id)
        try:
            page = max(1, int(request.GET.get("page", 1)))
        except ValueError:
            page = 1
        members = selectors.segment_member_list(
            segment=segment,
            offset=(page - 1) * SEGMENT_MEMBERS_PER_PAGE,
            limit=SEGMENT_MEMBERS_PER_PAGE,
        )
        changes = overview.segment_changes(segment=segment, days=SEGMENT_CHANGE_DAYS)
        pages = max(1, -(-members.total // SEGMENT_MEMBERS_PER_PAGE))
        return self.render(
            {
                "segment": segment,
                "members": members,
                "page": page,
                "pages": pages,
                "changes_chart": Chart(
                    id="changes-chart",
                    title=f"Joins and leaves per day, last {SEGMENT_CHANGE_DAYS} days",
                    chart_type="bar",
                    x=[c.day.isoformat() for c in changes],
                    y=[c.joined for c in changes],
                    y_title="Joined",
                    more=(("Left", [c.left for c in changes]),),
                    axis_title=segment.get_target_display(),
                    x_span=day_span([c.day for c in changes]),
                    bar_ms=int(DAY_MS * 0.8),
                    empty_text=f"No joins or leaves in the last {SEGMENT_CHANGE_DAYS} days.",
                ),
                "conditions": selectors.read_conditions(segment),
            }
        )


class HealthView(WorkspaceView):
    """Why did my data not arrive: accepted per minute, backlog, drops, keys, connections."""

    template_name = "dashboard/health.html"

    def get(self, request: HttpRequest) -> HttpResponse:
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
            }
        )
