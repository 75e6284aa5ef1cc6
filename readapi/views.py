"""The read API: thin views that parse parameters, call engagement selectors, serialise.

Every view derives from ReadApiView, which owns authentication, throttling and tenant scoping:
a view gets workspaces, accounts, users and segments only through its `scoped_*` methods
(engagement.scoping, shared with the dashboard), which always filter by the token's product, so an
id of another product answers 404.
"""

from typing import cast

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api_errors import ApiError
from config.db_routers import replica_reads
from config.exceptions import ErrorSerializer
from engagement import selectors
from engagement.models import Workspace
from engagement.scoping import ProductScopedView
from readapi import params as q
from readapi import segment_serializers as ss
from readapi import serializers as s
from readapi import workspace_serializers as ws
from readapi.authentication import BearerTokenAuthentication, HasApiToken, TokenPrincipal
from readapi.links import Links
from readapi.models import ApiToken
from readapi.pagination import Window, envelope_serializer, paginated_response
from readapi.throttling import TokenRateThrottle

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="A parameter is missing or not valid."),
    401: OpenApiResponse(ErrorSerializer, description="No valid token (WWW-Authenticate)."),
    404: OpenApiResponse(ErrorSerializer, description="Not found, or another product's."),
    429: OpenApiResponse(ErrorSerializer, description="Throttled; see Retry-After."),
}

WorkspacePage = envelope_serializer(ws.WorkspaceSerializer, "WorkspacePage")
AccountPage = envelope_serializer(s.AccountSerializer, "AccountPage")
UserPage = envelope_serializer(s.UserSerializer, "UserPage")
SegmentPage = envelope_serializer(ss.SegmentSerializer, "SegmentPage")
SegmentMemberPage = envelope_serializer(ss.SegmentMemberSerializer, "SegmentMemberPage")


def not_found(what: str, ident: int) -> ApiError:
    return ApiError(404, "not_found", f"{what} {ident} was not found.")


class ReadApiView(ProductScopedView, APIView):
    """Base of every read API view: Bearer token, per-token throttle, the token's product only
    (engagement.scoping: records through `scoped_*`, another product's id answers 404)."""

    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [HasApiToken]
    throttle_classes = [TokenRateThrottle]

    def dispatch(self, request, *args, **kwargs):
        # Everything this request reads may come from the read replica, when one is configured.
        with replica_reads():
            return super().dispatch(request, *args, **kwargs)

    @property
    def principal(self) -> TokenPrincipal:
        # BearerTokenAuthentication makes every request's user that reaches a view a token's.
        return cast(TokenPrincipal, self.request.user)

    @property
    def token(self) -> ApiToken:
        return cast(ApiToken, self.request.auth)  # BearerTokenAuthentication's, as principal

    @property
    def product_id(self) -> int:
        return self.principal.product_id

    def params(self, serializer_class: type[serializers.Serializer]) -> dict:
        """The query parameters, validated (400 with `fields` when not valid)."""
        serializer = serializer_class(data=self.request.query_params)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def context(self, **extra) -> dict:
        return {"links": Links(self.request.build_absolute_uri("/").rstrip("/")), **extra}

    def find_workspace(self, workspace_id: int) -> Workspace | None:
        return selectors.workspace_get_for_product(
            product_id=self.product_id, workspace_id=workspace_id
        )

    def not_found(self, what: str, ident: int) -> ApiError:
        return not_found(what, ident)

    def scoped_workspace_or_default(self, workspace_id: int | None) -> Workspace:
        if workspace_id is not None:
            return self.scoped_workspace(workspace_id)
        workspace = selectors.workspace_default_for_product(product_id=self.product_id)
        if workspace is None:
            raise ApiError(404, "not_found", "This product has no workspace.")
        return workspace

    def page(self, data: list, total: int, params: dict) -> Response:
        window = Window(limit=params["limit"], offset=params["offset"])
        return paginated_response(self.request, data=data, total=total, window=window)


def _require_match_pair(params: dict) -> bool:
    """True when a lookup was asked for; 400 missing_match_parameter when half of one was."""
    has_type, has_value = "match_type" in params, "match_value" in params
    if has_type != has_value:
        missing = "match_value" if has_type else "match_type"
        raise ApiError(
            400,
            "missing_match_parameter",
            "match_type and match_value go together: give both, or neither.",
            fields={missing: ["Required together with the other match parameter."]},
        )
    return has_type


# --- Workspaces -------------------------------------------------------------------------------


class WorkspaceListView(ReadApiView):
    @extend_schema(
        operation_id="workspaces_list",
        summary="List the workspaces the token can read",
        parameters=[q.WorkspaceListQuery],
        responses={200: WorkspacePage, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        params = self.params(q.WorkspaceListQuery)
        workspaces = selectors.workspace_list_for_product(product_id=self.product_id)
        total = workspaces.count()
        page = workspaces[params["offset"] : params["offset"] + params["limit"]]
        data = ws.WorkspaceSerializer.many_init(page, context=self.context()).data
        return self.page(data, total, params)


class WorkspaceDetailView(ReadApiView):
    @extend_schema(
        operation_id="workspaces_retrieve",
        summary="Retrieve one workspace (expand=stats adds user and account counts)",
        parameters=[q.WorkspaceDetailQuery],
        responses={200: ws.WorkspaceSerializer, **ERRORS},
    )
    def get(self, request: Request, workspace_id: int) -> Response:
        params = self.params(q.WorkspaceDetailQuery)
        workspace = self.scoped_workspace(workspace_id)
        stats = None
        if "stats" in params.get("expand", ()):
            stats = selectors.workspace_stats(
                workspace=workspace, counts_cache_seconds=settings.READ_API_COUNTS_CACHE_SECONDS
            )
        return Response(ws.WorkspaceSerializer(workspace, context=self.context(stats=stats)).data)


# --- Accounts ---------------------------------------------------------------------------------


class AccountPageMixin(ReadApiView):
    def account_page(self, workspace: Workspace, page, params: dict) -> Response:
        expand = params.get("expand", set())
        segments = {}
        if "segments" in expand:
            segments = selectors.segment_memberships_by_target(
                workspace=workspace, account_ids=[row.account_id for row in page.items]
            )
        context = self.context(workspace=workspace, expand=expand, segments=segments)
        data = s.AccountSerializer.many_init(page.items, context=context).data
        return self.page(data, page.total, params)


class AccountListView(AccountPageMixin, ReadApiView):
    @extend_schema(
        operation_id="accounts_list",
        summary="List a workspace's accounts, ranked by engagement score (ties by id)",
        parameters=[q.AccountListQuery],
        responses={200: AccountPage, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        params = self.params(q.AccountListQuery)
        workspace = self.scoped_workspace(params["workspace_id"])
        if params.get("parent_id") is not None:
            parent = self.scoped_account(params["parent_id"])
            page = selectors.account_children_ranked(
                workspace=workspace,
                parent_id=parent.id,
                offset=params["offset"],
                limit=params["limit"],
            )
        else:
            page = selectors.account_list_ranked(
                workspace=workspace,
                offset=params["offset"],
                limit=params["limit"],
                counts_cache_seconds=settings.READ_API_COUNTS_CACHE_SECONDS,
            )
        return self.account_page(workspace, page, params)


class AccountDetailView(ReadApiView):
    @extend_schema(
        operation_id="accounts_retrieve",
        summary="Retrieve one account with its full metric set",
        parameters=[q.RecordDetailQuery],
        responses={200: s.AccountSerializer, **ERRORS},
    )
    def get(self, request: Request, account_id: int) -> Response:
        params = self.params(q.RecordDetailQuery)
        account = self.scoped_account(account_id)
        workspace = self.scoped_workspace_or_default(params.get("workspace_id"))
        score = selectors.account_score_get(workspace=workspace, account=account)
        expand = params.get("expand", set())
        segments = {}
        if "segments" in expand:
            segments = selectors.segment_memberships_by_target(
                workspace=workspace, account_ids=[account.id]
            )
        context = self.context(workspace=workspace, expand=expand, segments=segments)
        return Response(s.AccountSerializer(score, context=context).data)


class LegacyAccountLookupView(AccountPageMixin, ReadApiView):
    @extend_schema(
        operation_id="v1_accounts_lookup",
        summary="Legacy lookup of accounts by id, or by domain, name, tracking id or any trait",
        parameters=[q.V1AccountQuery],
        responses={200: AccountPage, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        params = self.params(q.V1AccountQuery)
        by_match = _require_match_pair(params)
        if by_match == ("id" in params):
            raise ApiError(
                400,
                "missing_match_parameter" if not by_match else "invalid_parameters",
                "Give either id, or match_type and match_value.",
                fields={"id": ["Give id, or match_type with match_value (not both)."]},
            )
        workspace = self.scoped_workspace(params["workspace_id"])
        if by_match:
            page = selectors.account_find(
                workspace=workspace,
                match_type=params["match_type"],
                match_value=params["match_value"],
                offset=params["offset"],
                limit=params["limit"],
            )
        else:
            page = selectors.account_get_page(workspace=workspace, account_id=params["id"])
            if not page.items:
                raise not_found("Account", params["id"])
        return self.account_page(workspace, page, params)


# --- Users ------------------------------------------------------------------------------------


class UserListView(ReadApiView):
    @extend_schema(
        operation_id="users_list",
        summary="List a workspace's users by engagement score, or look users up by email or "
        "tracking id",
        parameters=[q.UserListQuery],
        responses={200: UserPage, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        params = self.params(q.UserListQuery)
        by_match = _require_match_pair(params)
        workspace = self.scoped_workspace(params["workspace_id"])
        window = {"offset": params["offset"], "limit": params["limit"]}
        if by_match:
            page = selectors.user_get_by_match(
                workspace=workspace,
                match_type=params["match_type"],
                match_value=params["match_value"],
                **window,
            )
        else:
            page = selectors.user_list_ranked(
                workspace=workspace,
                counts_cache_seconds=settings.READ_API_COUNTS_CACHE_SECONDS,
                **window,
            )
        expand = params.get("expand", set())
        segments = {}
        if "segments" in expand:
            segments = selectors.segment_memberships_by_target(
                workspace=workspace, user_ids=[row.user_id for row in page.items]
            )
        context = self.context(workspace=workspace, expand=expand, segments=segments)
        data = s.UserSerializer.many_init(page.items, context=context).data
        return self.page(data, page.total, params)


class UserDetailView(ReadApiView):
    @extend_schema(
        operation_id="users_retrieve",
        summary="Retrieve one user with their full metric set",
        parameters=[q.RecordDetailQuery],
        responses={200: s.UserSerializer, **ERRORS},
    )
    def get(self, request: Request, user_id: int) -> Response:
        params = self.params(q.RecordDetailQuery)
        user = self.scoped_user(user_id)
        workspace = self.scoped_workspace_or_default(params.get("workspace_id"))
        score = selectors.user_score_get(workspace=workspace, user=user)
        expand = params.get("expand", set())
        segments = {}
        if "segments" in expand:
            segments = selectors.segment_memberships_by_target(
                workspace=workspace, user_ids=[user.id]
            )
        context = self.context(workspace=workspace, expand=expand, segments=segments)
        return Response(s.UserSerializer(score, context=context).data)


# --- Segments ---------------------------------------------------------------------------------


class SegmentListView(ReadApiView):
    @extend_schema(
        operation_id="segments_list",
        summary="List a workspace's segments",
        parameters=[q.WorkspaceScopedListQuery],
        responses={200: SegmentPage, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        params = self.params(q.WorkspaceScopedListQuery)
        workspace = self.scoped_workspace(params["workspace_id"])
        page = selectors.segment_list_for_workspace(
            workspace=workspace, offset=params["offset"], limit=params["limit"]
        )
        data = ss.SegmentSerializer.many_init(page.items, context=self.context()).data
        return self.page(data, page.total, params)


class SegmentDetailView(ReadApiView):
    @extend_schema(
        operation_id="segments_retrieve",
        summary="Retrieve one segment",
        responses={200: ss.SegmentSerializer, **ERRORS},
    )
    def get(self, request: Request, segment_id: int) -> Response:
        segment = self.scoped_segment(segment_id)
        return Response(ss.SegmentSerializer(segment, context=self.context()).data)


class SegmentMemberListView(ReadApiView):
    @extend_schema(
        operation_id="segments_members_list",
        summary="List a segment's current members with when they joined (latest first)",
        parameters=[q.SegmentMembersQuery],
        responses={200: SegmentMemberPage, **ERRORS},
    )
    def get(self, request: Request, segment_id: int) -> Response:
        params = self.params(q.SegmentMembersQuery)
        segment = self.scoped_segment(segment_id)
        page = selectors.segment_member_list(
            segment=segment, offset=params["offset"], limit=params["limit"]
        )
        context = self.context(workspace=segment.workspace)
        data = ss.SegmentMemberSerializer.many_init(page.items, context=context).data
        return self.page(data, page.total, params)
