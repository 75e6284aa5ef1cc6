"""The DRF front door of ingestion: the request to the rules of `ingestion.acceptance`, then 2xx
or an error. Django's routing, host check and security middleware wrap it; the ASGI door
(`ingestion.asgi`) does the same for its requests."""

import functools
import time

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ingestion import acceptance
from ingestion import schema as openapi
from ingestion.acceptance import http
from ingestion.store import store_accepted


def ingestion_limits() -> acceptance.Limits:
    return _limits(
        settings.INGESTION_MAX_BODY_BYTES,
        settings.INGESTION_MAX_BATCH_BYTES,
        settings.INGESTION_CLOCK_SKEW_SECONDS,
    )


@functools.lru_cache(maxsize=8)
def _limits(single: int, batch: int, clock_skew_seconds: int) -> acceptance.Limits:
    return acceptance.Limits(single=single, batch=batch, clock_skew_ms=clock_skew_seconds * 1000)


def error_response(error: acceptance.RequestError) -> Response:
    response = Response(error.body(), status=error.status)
    if error.retry_after is not None:
        response["Retry-After"] = str(error.retry_after)
    return response


def _headers(request: HttpRequest) -> dict[str, str]:
    """The request's header fields as the rules take them (see `http.joined_headers`): the WSGI
    server already joined repeated fields with ","."""
    headers = {}
    for name, value in request.META.items():
        if name.startswith("HTTP_"):
            headers[name[5:].replace("_", "-").lower()] = value
        elif name in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            headers[name.replace("_", "-").lower()] = value
    return headers


def _body(request: HttpRequest, headers: dict[str, str], cap: int) -> bytes:
    """The whole body, or its first `cap` bytes when longer; `http.incomplete()` when it ended
    early. A chunked body has no Content-Length, so Django sees none of it: it is read from the
    server's input stream, which gunicorn ends where the body ends."""
    declared = http.declared_length(headers)
    if declared is not None:
        body = request.body
        if len(body) < declared:
            raise http.incomplete()
        return body
    if "chunked" in headers.get("transfer-encoding", "").lower() and request.META.get(
        "wsgi.input_terminated"
    ):
        try:
            return request.META["wsgi.input"].read(cap)
        except Exception as exc:  # the server's own error for a chunk cut short or malformed
            raise http.incomplete() from exc
    return request.body


class IngestionView(APIView):
    """POST one call: 202 with an empty body once it is stored durably."""

    endpoint_name: str = ""
    authentication_classes: list = []
    permission_classes: list = []
    parser_classes: list = []
    schema = openapi.IngestionAutoSchema()

    def post(self, request: Request) -> Response:
        return self.accept(request)

    def accept(self, request: Request) -> Response:
        received_at = timezone.now()
        limits = ingestion_limits()
        headers = _headers(request)
        try:
            limit = acceptance.body_limit(self.endpoint_name, limits)
            target = request.META.get("RAW_URI") or request.get_full_path()
            http.check_head(headers, len(target.encode("latin-1", "replace")), limit)
            outcome = acceptance.accept(
                self.endpoint_name,
                _body(request, headers, limit + 1),
                authorization=headers.get("authorization"),
                content_encoding=headers.get("content-encoding"),
                now_ms=int(time.time() * 1000),
                limits=limits,
            )
            if outcome.accepted:
                store_accepted(outcome.accepted, received_at=received_at)
        except acceptance.RequestError as error:
            return error_response(error)
        return Response(outcome.body, status=outcome.status)


class SegmentBatchView(IngestionView):
    """POST a Segment-SDK batch: 200 `{"success": true}`, with `rejected` items if any."""

    def post(self, request: Request) -> Response:
        return self.accept(request)


class SegmentMessageView(IngestionView):
    """POST one Segment-spec message (identify, group, track, page, screen): 202, empty body."""

    def post(self, request: Request) -> Response:
        return self.accept(request)


_VIEW_BY_KIND = {acceptance.BATCH: SegmentBatchView, acceptance.SEGMENT: SegmentMessageView}


def ingestion_view(endpoint_name: str):
    name = endpoint_name.replace("/", "_").title().replace("_", "")
    base = _VIEW_BY_KIND.get(acceptance.ENDPOINTS[endpoint_name].takes, IngestionView)
    view_class = type(f"{name}View", (base,), {"endpoint_name": endpoint_name})
    view_class = extend_schema(
        request=openapi.request_body(endpoint_name),
        responses=openapi.responses(endpoint_name),
    )(view_class)
    return view_class.as_view()
