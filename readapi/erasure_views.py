"""Erasure through the read API: DELETE a user or an account (a token with the `delete` scope),
then follow the deletion's receipt. Thin views over engagement.erasure.

DELETE shares its path with the GET detail views, so the user and account views here extend
those with a `delete` handler. Erasure reads and writes the primary: a receipt must show the
request it has just recorded, never a replica's older state.
"""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api_errors import ApiError
from config.exceptions import ErrorSerializer
from engagement import erasure
from engagement.models import Erasure
from readapi import views
from readapi.links import Links
from readapi.models import Scope

ERASURE_ERRORS = {
    **views.ERRORS,
    403: OpenApiResponse(ErrorSerializer, description="The token may not delete (read only)."),
}


class ErasureQuery(serializers.Serializer):
    suppress = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Also drop data that arrives later for this tracking id (only a keyed hash "
        "of it is kept).",
    )


class DeletionLinksSerializer(serializers.Serializer):
    self = serializers.CharField(help_text="The deletion: /v2/deletions/<id>.")


class DeletionReceiptSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=Erasure.Status.choices)
    _links = DeletionLinksSerializer(source="*")

    def to_representation(self, instance: Erasure) -> dict:
        return {
            "id": instance.id,
            "status": instance.status,
            "_links": {"self": Links().path("read-deletion", instance.id)},
        }


class DeletionSerializer(DeletionReceiptSerializer):
    kind = serializers.ChoiceField(choices=Erasure.Kind.choices)
    suppress = serializers.BooleanField()
    requested_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    counts = serializers.DictField(
        child=serializers.IntegerField(), help_text="Rows removed or unlinked, by kind."
    )
    reason = serializers.CharField(
        allow_null=True,
        help_text="Why a `failed` deletion failed: the cause's class (e.g. IntegrityError) and "
        "what to do; null otherwise. Transient causes (a deadlock, a lost database connection) "
        "never fail a deletion: it stays `running` and is retried until it completes.",
    )

    def to_representation(self, instance: Erasure) -> dict:
        field = serializers.DateTimeField()
        return {
            **super().to_representation(instance),
            "kind": instance.kind,
            "suppress": instance.suppress,
            "requested_at": field.to_representation(instance.requested_at),
            "started_at": instance.started_at and field.to_representation(instance.started_at),
            "completed_at": instance.completed_at
            and field.to_representation(instance.completed_at),
            "counts": instance.counts,
            "reason": erasure.erasure_failure_reason(instance),
        }


class ErasureMixin(views.ReadApiView):
    """DELETE of one of the token's users or accounts: 202 with the deletion's receipt."""

    kind: str

    def dispatch(self, request, *args, **kwargs):
        if request.method == "DELETE":  # on the primary: see the module docstring
            return APIView.dispatch(self, request, *args, **kwargs)
        return super().dispatch(request, *args, **kwargs)

    def erase(self, target_id: int) -> Response:
        if not self.token.allows(Scope.DELETE):
            raise ApiError(
                403,
                "insufficient_scope",
                "This token may not delete: issue one with the delete scope.",
            )
        params = self.params(ErasureQuery)
        try:
            deletion = erasure.erasure_request(
                product_id=self.product_id,
                kind=self.kind,
                target_id=target_id,
                suppress=params["suppress"],
                via=Erasure.Via.API,
                token_id=self.principal.token_id,
            )
        except erasure.ErasureTargetMissing:
            raise views.not_found(self.kind.capitalize(), target_id) from None
        return Response(DeletionReceiptSerializer(deletion).data, status=202)


class UserView(ErasureMixin, views.UserDetailView):
    kind = Erasure.Kind.USER

    @extend_schema(
        operation_id="users_destroy",
        summary="Erase a user with their events, scores and memberships (token scope: delete)",
        parameters=[ErasureQuery],
        request=None,
        responses={202: DeletionReceiptSerializer, **ERASURE_ERRORS},
    )
    def delete(self, request: Request, user_id: int) -> Response:
        return self.erase(user_id)


class AccountView(ErasureMixin, views.AccountDetailView):
    kind = Erasure.Kind.ACCOUNT

    @extend_schema(
        operation_id="accounts_destroy",
        summary="Erase an account with its scores; its users stay, unlinked (token scope: delete)",
        parameters=[ErasureQuery],
        request=None,
        responses={202: DeletionReceiptSerializer, **ERASURE_ERRORS},
    )
    def delete(self, request: Request, account_id: int) -> Response:
        return self.erase(account_id)


class DeletionDetailView(views.ReadApiView):
    def dispatch(self, request, *args, **kwargs):
        return APIView.dispatch(self, request, *args, **kwargs)

    @extend_schema(
        operation_id="deletions_retrieve",
        summary="A deletion's status (pending, running, completed, failed) and what it removed",
        responses={200: DeletionSerializer, **views.ERRORS},
    )
    def get(self, request: Request, deletion_id: int) -> Response:
        deletion = erasure.erasure_get_for_product(
            product_id=self.product_id, erasure_id=deletion_id
        )
        if deletion is None:
            raise views.not_found("Deletion", deletion_id)
        return Response(DeletionSerializer(deletion).data)
