"""The view of bench_ingest's Django yardstick: POST /v2/track as a Django developer writes it.

It parses the JSON, checks that an Authorization header is there and inserts one row through the
ORM (autocommit: committed before the 202), the work of the lean door (bench/lean_door.py) done
the usual Django way: one request, one INSERT, one commit.
"""

import hashlib
import json

from django.http import HttpRequest, HttpResponse
from django.urls import re_path
from django.utils import timezone
from django.views.decorators.http import require_POST

from bench.models import BareAccepted


@require_POST
def accept(request: HttpRequest) -> HttpResponse:
    received_at = timezone.now()
    try:
        body = json.loads(request.body)
    except ValueError:
        return HttpResponse(status=400)
    authorization = request.headers.get("Authorization")
    if authorization is None:
        return HttpResponse(status=401)
    BareAccepted.objects.create(
        received_at=received_at,
        key_digest=hashlib.sha256(authorization.encode()).hexdigest(),  # as the door stores
        body=body,
    )
    return HttpResponse(status=202)


urlpatterns = [re_path(r"^v2/track/?$", accept)]
