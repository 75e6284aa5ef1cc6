"""Query strings no page of the service can read, answered with a 400 page before a view runs.

A NUL byte in a query value reached the admin's filters and searches (and any other page's
lookups) and PostgreSQL refused the string: a 500. A date drill-down part of the admin
(`dropped_at__year=99999999999`) past what a date holds overflowed in Django's own code. Both are
refused here, for every page at once (the admin of every registered model, third-party ones
included); API paths validate their parameters themselves and keep their JSON error body.
"""

import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from config.errors import is_api
from dashboard.errors import bad_request

# Django's date lookups, as the admin's date hierarchy and date filters send them.
_DATE_PART = re.compile(r"__(year|iso_year|quarter|month|week|week_day|iso_week_day|day)$")
_SHORT_NUMBER = re.compile(r"-?\d{1,4}")


def query_problem(request: HttpRequest) -> str | None:
    """Why no page can read this query string, or None."""
    for name, values in request.GET.lists():
        if "\x00" in name or any("\x00" in value for value in values):
            return (
                f"The address's parameter {name.replace(chr(0), '%00')!r} contains a NUL "
                "character (%00), which no page of this service accepts."
            )
        if request.path.startswith("/admin/") and _DATE_PART.search(name):
            if not all(_SHORT_NUMBER.fullmatch(value) for value in values):
                return f"The address's parameter {name!r} must be a number of at most 4 digits."
    return None


class PageQueryMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not is_api(request):
            problem = query_problem(request)
            if problem is not None:
                return bad_request(request, problem)
        return self.get_response(request)
