"""Offset pagination and the one envelope of every list:
{"data": [...], "pagination": {"limit", "offset", "total"}, "_links": {"self", "next", "prev"}}.
"""

from dataclasses import dataclass

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

DEFAULT_LIMIT = 20
MAX_LIMIT = 100


@dataclass(frozen=True, slots=True)
class Window:
    limit: int
    offset: int


def _page_url(url: str, limit: int, offset: int) -> str:
    url = replace_query_param(url, "limit", limit)
    if offset == 0:
        return remove_query_param(url, "offset")
    return replace_query_param(url, "offset", offset)


def paginated_response(request: Request, *, data: list, total: int, window: Window) -> Response:
    url = request.build_absolute_uri()
    limit, offset = window.limit, window.offset
    next_url = _page_url(url, limit, offset + limit) if offset + limit < total else None
    prev_url = _page_url(url, limit, max(offset - limit, 0)) if offset > 0 else None
    return Response(
        {
            "data": data,
            "pagination": {"limit": limit, "offset": offset, "total": total},
            "_links": {"self": url, "next": next_url, "prev": prev_url},
        }
    )


class PaginationSerializer(serializers.Serializer):
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    total = serializers.IntegerField()


class PageLinksSerializer(serializers.Serializer):
    self = serializers.URLField()
    next = serializers.URLField(allow_null=True)
    prev = serializers.URLField(allow_null=True)


def envelope_serializer(item: type[serializers.Serializer], name: str) -> type:
    """The envelope's schema around one record serializer (for the OpenAPI document)."""
    return type(
        name,
        (serializers.Serializer,),
        {
            "data": item(many=True),
            "pagination": PaginationSerializer(),
            "_links": PageLinksSerializer(),
            "__module__": __name__,
        },
    )
