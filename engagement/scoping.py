"""The one product-scoped base of every view that reads a product's records (ProductScopedView:
the read API's ReadApiView and WorkspaceView), and the one base of every signed-in page inside a
workspace (WorkspaceView: the dashboard's pages and the automations').

A request sees the records of one product; an id of another product's record answers 404, as if
there were no such record (never 403, which would tell that it exists). A view reaches
workspaces, accounts, users and segments only through the `scoped_*` methods here, which always
filter by the request's product. What differs between the two is said by each, in three lines:

- `product_id`: the product this request may see (the read API: the token's; the dashboard: the
  product of the workspace in its address, once `scoped_workspace` found it);
- `find_workspace`: how a workspace id is looked up among what this request may see (the read
  API: the token's product's workspaces; the dashboard: those of the signed-in person's
  memberships, engagement.memberships);
- `not_found`: the 404 in the view's own kind (the API's error body, the dashboard's page).

It lives in engagement, with the membership rules it applies (apps never import each other, and
the dashboard and the automations both serve workspace pages); ProductScopedView uses no web
framework: the 404 a view raises is its own.
"""

from __future__ import annotations

from functools import cached_property

from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.views import View

from engagement import selectors
from engagement.memberships import product_role, workspace_visible_to, workspaces_visible_to
from engagement.models import Account, Segment, User, Workspace


class ProductScopedView:
    """Mixin of the views that read one product's records; see the module docstring."""

    # The workspace the request works in when its address names one (a dashboard page): its
    # segments only. None: any workspace of the product (the read API).
    workspace: Workspace | None = None

    @property
    def product_id(self) -> int:
        raise NotImplementedError

    def find_workspace(self, workspace_id: int) -> Workspace | None:
        raise NotImplementedError

    def not_found(self, what: str, ident: int) -> Exception:
        """The exception that answers 404 for `what` ("Workspace", "Account", ...) `ident`."""
        raise NotImplementedError

    def scoped_workspace(self, workspace_id: int) -> Workspace:
        workspace = self.find_workspace(workspace_id)
        if workspace is None:
            raise self.not_found("Workspace", workspace_id)
        return workspace

    def scoped_account(self, account_id: int) -> Account:
        account = selectors.account_get_for_product(
            product_id=self.product_id, account_id=account_id
        )
        if account is None:
            raise self.not_found("Account", account_id)
        return account

    def scoped_user(self, user_id: int) -> User:
        user = selectors.user_get_for_product(product_id=self.product_id, user_id=user_id)
        if user is None:
            raise self.not_found("User", user_id)
        return user

    def scoped_segment(self, segment_id: int) -> Segment:
        segment = selectors.segment_get_for_product(
            product_id=self.product_id, segment_id=segment_id
        )
        if segment is None or (
            self.workspace is not None and segment.workspace_id != self.workspace.id
        ):
            raise self.not_found("Segment", segment_id)
        return segment


class WorkspaceView(ProductScopedView, LoginRequiredMixin, View):
    """Base of every signed-in page inside a workspace (the dashboard's, the automations'): a
    visitor who is not signed in is sent to the sign-in page; the workspace in the address
    (`workspace_id`) is one of the signed-in person's (engagement.memberships) or the page
    answers 404 ("No such workspace."), as does any record of another product (`scoped_*`).
    render() gives every template the workspace, its product, the person's workspaces and their
    role in the product (base_context)."""

    workspace: Workspace
    template_name = ""

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponseBase:
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

    @cached_property
    def role(self) -> str | None:
        """The signed-in person's role in the workspace's product (ProductMembership.Role)."""
        return product_role(self.request.user, self.product_id)

    def base_context(self) -> dict:
        """What every workspace page's template is given."""
        return {
            "workspace": self.workspace,
            "product": self.workspace.product,
            "workspaces": workspaces_visible_to(self.request.user),
            "role": self.role,
        }

    def render(self, context: dict, template: str | None = None, status: int = 200) -> HttpResponse:
        return render(
            self.request,
            template or self.template_name,
            {**self.base_context(), **context},
            status=status,
        )
