"""The dashboard's automation pages: the list, one automation with its deliveries, and the
manager's actions (create, test, replay, rotate, switch on and off). They extend the dashboard's
layout and derive from the dashboard's base of workspace pages (engagement.scoping.WorkspaceView):
the workspace is the signed-in user's or 404, as on every dashboard page."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect

from automations import delivery as deliveries
from automations import selectors, services, trait_sync
from automations.display import delivery_body_shown
from automations.forms import (
    SHOWN_AS,
    AutomationForm,
    ReplaySinceForm,
    TraitSyncForm,
    faults_shown,
)
from automations.ids import is_delivery_id
from automations.models import Automation, Delivery
from automations.tasks import trait_sync_run as trait_sync_run_task
from engagement.input_rules import posted_id
from engagement.models import ProductMembership
from engagement.scoping import WorkspaceView

# The session key that holds a new secret until its page has shown it once.
_SHOWN_ONCE = "automation-secret-{}"


class _AutomationPage(WorkspaceView):
    """An automations page: a dashboard workspace page (engagement.scoping.WorkspaceView) whose
    changes are the product managers'."""

    @property
    def manages(self) -> bool:
        return self.role == ProductMembership.Role.MANAGER

    def require_manager(self) -> None:
        if not self.manages:
            raise PermissionDenied("Managers of the product change automations.")

    def automation(self, automation_id: int) -> Automation:
        found = Automation.objects.filter(id=automation_id, workspace=self.workspace).first()
        if found is None:
            raise Http404("No such automation.")
        return found

    def base_context(self) -> dict:
        return {**super().base_context(), "manages": self.manages, "section": "automations"}


class AutomationListView(_AutomationPage):
    def get(
        self,
        request: HttpRequest,
        form: AutomationForm | None = None,
        sync_form: TraitSyncForm | None = None,
        status: int = 200,
    ) -> HttpResponse:
        form = form or AutomationForm(workspace=self.workspace)
        rows = selectors.automation_list(workspace_id=self.workspace.id)
        return self.render(
            {
                "rows": rows,
                "form": form,
                "syncs": selectors.trait_sync_list(workspace_id=self.workspace.id),
                "sync_form": sync_form or TraitSyncForm(),
            },
            "automations/list.html",
            status=status,
        )

    def post(self, request: HttpRequest) -> HttpResponse:
        self.require_manager()
        if request.POST.get("action") == "sync_create":
            return self._sync_create(request)
        if request.POST.get("action") == "sync_run":
            sync_id = posted_id(request.POST.get("sync"))
            found = self.workspace.trait_syncs.filter(id=sync_id).first() if sync_id else None
            if found is None:
                raise Http404("No such score sync.")
            trait_sync_run_task.delay(found.id)
            return redirect("automations:list", self.workspace.id)
        form = AutomationForm(request.POST, workspace=self.workspace)
        if not form.is_valid():
            return self.get(request, form, status=400)
        try:
            automation = services.automation_create(workspace=self.workspace, **form.settings())
        except ValidationError as exc:  # changed since the form's check (a segment deleted)
            faults_shown(form, exc.message_dict, SHOWN_AS)
            return self.get(request, form, status=400)
        if automation.secret:
            request.session[_SHOWN_ONCE.format(automation.id)] = automation.secret
        return redirect("automations:detail", self.workspace.id, automation.id)

    def _sync_create(self, request: HttpRequest) -> HttpResponse:
        sync_form = TraitSyncForm(request.POST)
        if sync_form.is_valid():
            try:
                trait_sync.trait_sync_create(workspace=self.workspace, **sync_form.cleaned_data)
                return redirect("automations:list", self.workspace.id)
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    sync_form.add_error(field if field in sync_form.fields else None, errors)
        return self.get(request, sync_form=sync_form)


class AutomationDetailView(_AutomationPage):
    def get(
        self,
        request: HttpRequest,
        automation_id: int,
        edit_form: AutomationForm | None = None,
        switch_on_faults: list[str] | None = None,
        status: int = 200,
    ) -> HttpResponse:
        automation = self.automation(automation_id)
        secret = request.session.pop(_SHOWN_ONCE.format(automation.id), None)
        return self.render(
            {
                "automation": automation,
                "new_secret": secret,
                "deliveries": selectors.delivery_list(automation=automation, limit=100),
                "replay_form": ReplaySinceForm(),
                "edit_form": edit_form or AutomationForm.editing(automation),
                "switch_on_faults": switch_on_faults or [],
            },
            "automations/detail.html",
            status=status,
        )

    def _edit(self, request: HttpRequest, automation: Automation) -> HttpResponse:
        form = AutomationForm.editing(automation, request.POST)
        if form.is_valid():
            try:
                services.automation_update(automation=automation, **form.settings())
                return redirect("automations:detail", self.workspace.id, automation.id)
            except ValidationError as exc:  # changed since the form's check
                faults_shown(form, exc.message_dict, SHOWN_AS)
        return self.get(request, automation.id, edit_form=form, status=400)

    def _switch_on(self, request: HttpRequest, automation: Automation) -> HttpResponse | None:
        """Switch it on, its settings checked as on saving; a fault shows on the page (400)."""
        try:
            services.automation_update(automation=automation, enabled=True)
        except ValidationError as exc:
            faults = [f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items()]
            return self.get(request, automation.id, switch_on_faults=faults, status=400)
        return None

    def post(self, request: HttpRequest, automation_id: int) -> HttpResponse:
        self.require_manager()
        automation = self.automation(automation_id)
        action = request.POST.get("action", "")
        if action == "edit":
            return self._edit(request, automation)
        if action == "test":
            services.automation_test_send(automation=automation)
        elif action == "rotate" and automation.destination == Automation.Destination.WEBHOOK:
            secret = services.automation_secret_rotate(automation=automation)
            request.session[_SHOWN_ONCE.format(automation.id)] = secret
        elif action == "enable":
            refused = self._switch_on(request, automation)
            if refused is not None:
                return refused
        elif action == "disable":
            services.automation_switch_off(
                automation=automation,
                reason=services.switched_off_reason(
                    where="on the dashboard", who=request.user.get_username()
                ),
            )
        elif action == "replay":
            delivery_id = request.POST.get("delivery")
            found = (
                automation.deliveries.filter(id=delivery_id).first()
                if is_delivery_id(delivery_id)
                else None
            )
            if found is None:
                raise Http404("No such delivery.")
            deliveries.delivery_replay(delivery=found)
        elif action == "replay_failed":
            form = ReplaySinceForm(request.POST)
            if form.is_valid():
                deliveries.deliveries_replay_failed_since(
                    automation=automation, since=form.cleaned_data["since"]
                )
        else:
            return HttpResponse("Unknown action.", status=400)
        return redirect("automations:detail", self.workspace.id, automation.id)


class DeliveryView(_AutomationPage):
    def get(self, request: HttpRequest, automation_id: int, delivery_id: str) -> HttpResponse:
        automation = self.automation(automation_id)
        found = Delivery.objects.filter(id=delivery_id, automation=automation).first()
        if found is None:
            raise Http404("No such delivery.")
        return self.render(
            {
                "automation": automation,
                "delivery": found,
                "attempts": selectors.delivery_attempts(delivery=found),
                "body": delivery_body_shown(found),
            },
            "automations/delivery.html",
        )
