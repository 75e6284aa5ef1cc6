"""No admin list answers a hostile query string with a 500: every registered model's search and
every parameter of its filters, date drill-down, ordering and page, with a NUL byte (which
PostgreSQL refuses in a string) and other values no link of the admin would send."""

import pytest
from django.contrib import admin
from django.urls import reverse

HOSTILE = [
    "\x00",
    "a\x00b",
    "not-a-number",
    "-1",
    "99999999999999999999999999",
    "2020-13-45",
    "%",
    "x" * 5000,
]


def _changelists() -> list[str]:
    return sorted(
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in admin.site._registry
    )


def _parameters(response) -> list[str]:
    changelist = response.context["cl"]
    names = ["q", "o", "p"]
    for spec in changelist.filter_specs:
        names += spec.expected_parameters()
    if changelist.date_hierarchy:
        names += [f"{changelist.date_hierarchy}__{part}" for part in ("year", "month", "day")]
    return names


@pytest.mark.parametrize("url", _changelists())
def test_no_search_or_filter_value_is_a_server_error(url, admin_client, acme):
    admin_client.raise_request_exception = False  # a 500 is counted, not raised
    plain = admin_client.get(url)
    assert plain.status_code == 200
    failures = []
    for name in _parameters(plain):
        for value in HOSTILE:
            status = admin_client.get(url, {name: value}).status_code
            if status >= 500:
                failures.append((name, value[:12], status))
    assert not failures, "\n".join(map(repr, failures))


def test_a_nul_byte_gets_a_page_that_says_what_is_wrong(admin_client, acme):
    response = admin_client.get("/admin/ingestion/droppedrequest/", {"reason": "\x00"})

    assert response.status_code == 400
    assert "NUL" in response.content.decode()
