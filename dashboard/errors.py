"""The error pages of everything that is not an API path: 400, 403, 404 and 500 in the
dashboard's look, with its navigation and a link back.

404, 403 and 400 show the workspace's navigation when the address names a workspace the
signed-in person may read. The 500 page reads neither the database nor the session (either may
be what failed): it is the bare layout with a link to the dashboard.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseServerError
from django.shortcuts import render
from django.template import loader
from django.urls import Resolver404, reverse

from engagement.memberships import product_role, workspace_visible_to, workspaces_visible_to


def _workspace_context(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    match = request.resolver_match
    workspace_id = match.kwargs.get("workspace_id") if match else None
    workspace = workspace_visible_to(user, workspace_id) if workspace_id else None
    if workspace is None:
        return {}
    return {
        "workspace": workspace,
        "product": workspace.product,
        "workspaces": workspaces_visible_to(user),
        "role": product_role(user, workspace.product_id),
    }


def _ways_back(request: HttpRequest, context: dict) -> list[tuple[str, str]]:
    ways = []
    workspace = context.get("workspace")
    if workspace is not None:
        ways.append(
            (
                f"{workspace.product.name} / {workspace.name} overview",
                reverse("dashboard:overview", args=[workspace.id]),
            )
        )
    user = getattr(request, "user", None)
    if request.path.startswith("/admin/") and user is not None and user.is_staff:
        ways.append(("The admin's home", reverse("admin:index")))
    if user is not None and user.is_authenticated:
        ways.append(("The dashboard's home", reverse("dashboard:home")))
    else:
        ways.append(("Sign in", reverse("dashboard:login")))
    return ways


def error_page(request: HttpRequest, *, status: int, title: str, message: str) -> HttpResponse:
    context = _workspace_context(request)
    context.update(
        status=status,
        title=title,
        message=message,
        ways_back=_ways_back(request, context),
    )
    return render(request, "dashboard/error.html", context, status=status)


def _own_message(exception: Exception | None, default: str) -> str:
    """The page's own reason ("No such account.") when a view gave one, else `default`.
    The resolver's (a dict of tried patterns) is never shown."""
    if isinstance(exception, Http404) and not isinstance(exception, Resolver404):
        if exception.args and isinstance(exception.args[0], str):
            return exception.args[0]
    return default


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_page(
        request,
        status=404,
        title="Page not found",
        message=_own_message(exception, f"There is no page at {request.path}."),
    )


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_page(
        request,
        status=403,
        title="Not allowed",
        message="Your sign-in does not give access to this page.",
    )


def bad_request(request: HttpRequest, message: str = "") -> HttpResponse:
    return error_page(
        request,
        status=400,
        title="Bad request",
        message=message or "The address or the form sent is not one this service can read.",
    )


def server_error(request: HttpRequest) -> HttpResponse:
    # Rendered without the request: no context processor runs, so neither the session nor the
    # database is read (either may be what failed).
    template = loader.get_template("dashboard/500.html")
    return HttpResponseServerError(template.render({"home_url": reverse("dashboard:home")}))
