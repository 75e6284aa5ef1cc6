"""A bare Django view that only parses the JSON and answers 202: the yardstick of bench_ingest.

It runs under the service's settings and middleware, so the gap to the real doors is what
authentication, validation and the durable store cost.
"""

import json

from django.http import HttpRequest, HttpResponse
from django.urls import re_path
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
def bare_accept(request: HttpRequest) -> HttpResponse:
    json.loads(request.body)
    return HttpResponse(status=202)


urlpatterns = [re_path(r"^v2/track/?$", bare_accept)]
