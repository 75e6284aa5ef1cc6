"""The DRF front door of ingestion: raw bytes to the acceptance core, then 202 or an error."""

import time

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ingestion import core
from ingestion.store import store_accepted


def ingestion_limits() -> core.Limits:
    return core.Limits(
        single=settings.INGESTION_MAX_BODY_BYTES,
        batch=settings.INGESTION_MAX_BATCH_BYTES,
        clock_skew_ms=settings.INGESTION_CLOCK_SKEW_SECONDS * 1000,
    )


def error_response(error: core.RequestError) -> Response:
    response = Response(error.body(), status=error.status)
    if error.retry_after is not None:
        response["Retry-After"] = str(error.retry_after)
    return response


class IngestionView(APIView):
    """POST one call: 202 with an empty body once it is stored durably."""

    endpoint_name: str = ""
    authentication_classes: list = []
    permission_classes: list = []
    parser_classes: list = []

    def _content_too_large(self, request: Request, limit: int) -> bool:
        try:
            return int(request.META.get("CONTENT_LENGTH") or 0) > limit
        except ValueError:
            return False

    @extend_schema(
        request={"application/json": {"type": "object"}},
        responses={
            202: OpenApiResponse(description="Accepted and stored durably; empty body."),
            400: OpenApiResponse(description="Not JSON, not an object, or a field breaks a rule."),
            413: OpenApiResponse(description="Body larger than 32 KiB (after gunzip)."),
            503: OpenApiResponse(description="Cannot be stored now; see Retry-After."),
        },
    )
    def post(self, request: Request) -> Response:
        return self.accept(request)

    def accept(self, request: Request) -> Response:
        received_at = timezone.now()
        limits = ingestion_limits()
        try:
            limit = core.body_limit(self.endpoint_name, limits)
            if self._content_too_large(request, limit):
                raise core.too_large(limit)
            outcome = core.accept(
                self.endpoint_name,
                request.body,
                authorization=request.META.get("HTTP_AUTHORIZATION"),
                content_encoding=request.META.get("HTTP_CONTENT_ENCODING"),
                now_ms=int(time.time() * 1000),
                limits=limits,
            )
            if outcome.accepted:
                store_accepted(outcome.accepted, received_at=received_at)
        except core.RequestError as error:
            return error_response(error)
        return Response(outcome.body, status=outcome.status)


class SegmentBatchView(IngestionView):
    """POST a Segment-SDK batch: 200 `{"success": true}`, with `rejected` items if any."""

    @extend_schema(
        request={"application/json": {"type": "object"}},
        responses={
            200: OpenApiResponse(
                description='Stored durably: {"success": true}, plus "rejected": '
                '[{"index", "code", "message"}] for items left out.'
            ),
            400: OpenApiResponse(description="Not JSON, not an object, or no 'batch' list."),
            401: OpenApiResponse(description="No write key (Basic or 'writeKey')."),
            413: OpenApiResponse(description="Above 512 KiB (after gunzip) or 2,500 items."),
            503: OpenApiResponse(description="Cannot be stored now; see Retry-After."),
        },
    )
    def post(self, request: Request) -> Response:
        return self.accept(request)


class SegmentMessageView(IngestionView):
    """POST one Segment-spec message (identify, group, track, page, screen): 202, empty body."""

    @extend_schema(
        request={"application/json": {"type": "object"}},
        responses={
            202: OpenApiResponse(
                description="Stored durably; empty body. Unsupported types are dropped later."
            ),
            400: OpenApiResponse(description="Not JSON, not an object, or a field breaks a rule."),
            401: OpenApiResponse(description="No write key (Basic or 'writeKey')."),
            413: OpenApiResponse(description="Body larger than 32 KiB (after gunzip)."),
            503: OpenApiResponse(description="Cannot be stored now; see Retry-After."),
        },
    )
    def post(self, request: Request) -> Response:
        return self.accept(request)


_VIEW_BY_KIND = {core.BATCH: SegmentBatchView, core.SEGMENT: SegmentMessageView}


def ingestion_view(endpoint_name: str):
    name = endpoint_name.replace("/", "_").title().replace("_", "")
    base = _VIEW_BY_KIND.get(core.ENDPOINTS[endpoint_name].kind, IngestionView)
    view_class = type(f"{name}View", (base,), {"endpoint_name": endpoint_name})
    return view_class.as_view()
