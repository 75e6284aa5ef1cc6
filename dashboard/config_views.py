"""The workspace's configuration as code on the dashboard: everyone signed in to the product
reads and downloads the document; its managers edit and apply it (engagement.workspace_config,
the same service as `manage.py workspace_config`)."""

from __future__ import annotations

import json

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from engagement.input_rules import DocumentError, document_load
from engagement.memberships import can_manage_product
from engagement.scoping import WorkspaceView
from engagement.workspace_config import workspace_config_apply, workspace_config_get

# A document larger than this is not a workspace's configuration.
MAX_DOCUMENT_CHARACTERS = 1_000_000


class WorkspaceConfigView(WorkspaceView):
    template_name = "dashboard/config.html"

    def get(self, request: HttpRequest, *, text: str = "", faults=()) -> HttpResponse:
        document = json.dumps(workspace_config_get(workspace=self.workspace), indent=2)
        response = self.render(
            {
                "document": text or document,
                "faults": faults,
                "manages": can_manage_product(request.user, self.product_id),
                "saved": request.GET.get("saved") == "1",
            }
        )
        if faults:  # the form again, with what is wrong with what was sent
            response.status_code = 400
        return response

    def post(self, request: HttpRequest) -> HttpResponse:
        if not can_manage_product(request.user, self.product_id):
            raise PermissionDenied("Managers of the product change its workspaces.")
        text = request.POST.get("document", "")
        if len(text) > MAX_DOCUMENT_CHARACTERS:
            too_large = f"The document is too large: at most {MAX_DOCUMENT_CHARACTERS:,} characters"
            return self.get(request, text=text[:1000], faults=[too_large])
        try:
            document = document_load(text)
        except DocumentError as error:
            return self.get(request, text=text, faults=[f"The document is refused: {error}"])
        try:
            workspace_config_apply(workspace_id=self.workspace.id, document=document)
        except ValidationError as invalid:
            return self.get(request, text=text, faults=invalid.messages)
        return redirect(f"{reverse('dashboard:config', args=[self.workspace.id])}?saved=1")


class WorkspaceConfigDownloadView(WorkspaceView):
    def get(self, request: HttpRequest) -> HttpResponse:
        document = json.dumps(workspace_config_get(workspace=self.workspace), indent=2)
        response = HttpResponse(document, content_type="application/json")
        filename = f"workspace-{self.workspace.id}.json"
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response
