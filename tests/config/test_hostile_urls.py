"""No page answers an address with a 500: every route of the dashboard, the automation pages and
the admin, walked from the URL resolver, with each of its path parameters replaced by values no
link of the service would hold (NUL, 10,000 characters, unicode, `..`, 10**30, 0, another
product's ids), by GET and by POST, as a product's manager and as a superuser; the query string
each page reads, and the ids the manager's actions post ("Run now", "Replay", a key's origins),
likewise. An id in an address that is not an id of something the person may see is a 404.

Every failure is collected and all are printed together (as tests/config/test_admin_queries.py
does for the admin's lists)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from django.contrib import admin
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automations.models import Automation, Delivery, TraitSync
from automations.services import delivery_id_new
from engagement.models import Account, ProductMembership, Segment, User

# Embedded mode (SQLite) serves the same pages: the walk runs on both databases.
pytestmark = pytest.mark.both_databases

HUGE = 10**30
# Values for a text parameter (<str:...>, <path:...>, an admin object id), unencoded: NULs,
# 10,000 characters, unicode (up to the last character before the surrogates), a step up.
HOSTILE_TEXT = ["\x00", "a\x00b", "x" * 10_000, "é😀ü", "..", "msg_\x00", "-1", "%", "\ud7ff"]
# The admin quotes "/" and "_" in ids as _2F and _5F, and unquotes _00 to a NUL.
HOSTILE_ADMIN_IDS = [*HOSTILE_TEXT, "_00", str(HUGE), "0"]
HOSTILE_QUERY = ["\x00", "-1", "0", str(HUGE), "1e308", "nan", "x" * 10_000, "é😀", "..", ""]
NAMESPACES = ("dashboard", "automations", "admin")
# The query-string parameters each page reads (its view or form).
READS = {
    "dashboard:home": ["workspace"],
    "dashboard:accounts": ["q", "segment", "band", "sort", "order", "page"],
    "dashboard:accounts_csv": ["q", "segment", "band", "sort", "order", "page"],
    "dashboard:account": ["days"],
    "dashboard:user": ["days"],
    "dashboard:segment": ["page"],
    "dashboard:health": ["saved"],
    "dashboard:config": ["saved"],
}
_PARAMETER = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")


@dataclass(frozen=True)
class Route:
    name: str  # namespace:name
    pattern: str  # the whole route, as path() spells it (a regex for re_path)
    is_regex: bool


def routes() -> list[Route]:
    """Every route of the dashboard, automations and admin namespaces, from the resolver."""
    found = []

    def walk(patterns, prefix: str, namespace: str | None, is_regex: bool) -> None:
        for pattern in patterns:
            text = str(pattern.pattern)
            regex = is_regex or isinstance(pattern.pattern, RegexPattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + text, pattern.namespace or namespace, regex)
            elif isinstance(pattern, URLPattern) and namespace in NAMESPACES:
                found.append(Route(f"{namespace}:{pattern.name}", prefix + text, regex))

    walk(get_resolver().url_patterns, "", None, False)
    return found


def fill(pattern: str, values: dict[str, object]) -> str:
    """The path of a route with each parameter's value, percent-encoded."""
    return "/" + _PARAMETER.sub(lambda m: quote(str(values[m["name"]]), safe=""), pattern)


@dataclass
class World:
    """Acme's records the manager may see, and Globex's, which nobody of Acme may."""

    valid: dict[str, object]
    other: dict[str, object]
    manager: Client
    superuser: Client


def _records(tenant) -> dict[str, object]:
    now = timezone.now()
    account = Account.objects.create(product=tenant.product, tracking_id="initech")
    user = User.objects.create(product=tenant.product, tracking_id="ann")
    segment = Segment.objects.create(workspace=tenant.workspace, name="Enterprise", conditions=[])
    automation = Automation.objects.create(
        workspace=tenant.workspace, name="Hook", trigger="new_account", url="https://hook.example/"
    )
    delivery = Delivery.objects.create(
        id=delivery_id_new(),
        automation=automation,
        event_type="account.created",
        payload={},
        next_attempt_at=now,
        created_at=now,
    )
    sync = TraitSync.objects.create(
        workspace=tenant.workspace, host="https://api.segment.example", write_key="k"
    )
    return {
        "workspace_id": tenant.workspace.id,
        "account_id": account.id,
        "user_id": user.id,
        "segment_id": segment.id,
        "automation_id": automation.id,
        "delivery_id": delivery.id,
        "sync": sync.id,
        "key_id": tenant.key.id,
    }


@pytest.fixture
def world(acme, globex, django_user_model) -> World:
    person = django_user_model.objects.create_user("mia", password="pw-mia-12345")
    ProductMembership.objects.create(
        user=person, product=acme.product, role=ProductMembership.Role.MANAGER
    )
    root = django_user_model.objects.create_superuser("root", password="pw-root-12345")
    clients = []
    for signed_in in (person, root):
        # A 500 is counted, not raised; POSTs carry no CSRF token, as a forged form would not.
        client = Client(raise_request_exception=False)
        client.force_login(signed_in)
        clients.append(client)
    return World(_records(acme), _records(globex), *clients)


def _hostile_values(route: Route, name: str, converter: str, world: World) -> list[object]:
    if converter == "int":  # only digits route: the largest, zero, and another product's id
        return [HUGE, 0, world.other[name]]
    if route.name.startswith("admin:"):
        # Every value on each model's change page; its other pages, and every POST, share its
        # one lookup (ModelAdmin.get_object), so they take the NULs and the largest number.
        return HOSTILE_ADMIN_IDS if route.name.endswith("_change") else ["\x00", "_00", HUGE]
    return HOSTILE_TEXT


def hostile_paths(world: World) -> list[tuple[Route, str]]:
    """Each route with one parameter at a time replaced by a hostile value, the others valid."""
    valid = {
        **world.valid,
        "content_type_id": ContentType.objects.get_for_model(Delivery).id,
        "object_id": "1",
        "id": "1",
    }
    paths = []
    for route in routes():
        if route.is_regex:
            if route.pattern.endswith("(?P<url>.*)$"):  # the admin's catch-all
                paths += [(route, "/admin/" + quote(value, safe="")) for value in HOSTILE_TEXT]
            continue
        for found in _PARAMETER.finditer(route.pattern):
            name, converter = found["name"], found["converter"] or "str"
            for value in _hostile_values(route, name, converter, world):
                paths.append((route, fill(route.pattern, {**valid, name: value})))
    return paths


class Walk:
    """Requests, each in a savepoint rolled back afterwards (a request the database refused
    must not abort the test's transaction, failing every request after it), and every answer
    that is a 5xx, or not the one expected, noted to be printed all together."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def ask(
        self,
        who: str,
        client: Client,
        method: str,
        path: str,
        data: dict | None = None,
        expect: tuple[int, ...] | None = None,
    ) -> int:
        with transaction.atomic():
            status = getattr(client, method)(path, data or {}).status_code
            transaction.set_rollback(True)
        if status >= 500 or (expect is not None and status not in expect):
            shown = {name: str(value)[:40] for name, value in (data or {}).items()}
            self.failures.append(f"{status} {who} {method.upper()} {path[:160]} {shown or ''}")
        return status

    def assert_no_failures(self) -> None:
        assert not self.failures, f"{len(self.failures)} failures:\n" + "\n".join(self.failures)


def test_no_route_answers_a_hostile_path_with_a_server_error(world):
    walk = Walk()
    paths = hostile_paths(world)
    # The walk reached every admin model's pages (4 routes with an id each).
    assert len({route.pattern for route, _ in paths}) > 4 * len(admin.site._registry)
    for route, path in paths:
        in_admin = route.name.startswith("admin:")
        walk.ask("superuser", world.superuser, "get", path)
        if not in_admin or "%00" in path or "/_00/" in path:
            walk.ask("superuser", world.superuser, "post", path, {"post": "yes"})
        if in_admin:
            if "%00" in path:  # staff only: sent to sign in, or told there is no such page
                walk.ask("manager", world.manager, "get", path, expect=(302, 404))
            continue
        # Not an id of anything Acme's manager may see: the page says there is no such thing.
        walk.ask("manager", world.manager, "get", path, expect=(404,))
        walk.ask("manager", world.manager, "post", path, {"action": "edit"})
    walk.assert_no_failures()


def test_the_admins_view_on_site_link_with_a_hostile_object_id(world):
    walk = Walk()
    for model in admin.site._registry:
        content_type = ContentType.objects.get_for_model(model)
        for value in HOSTILE_ADMIN_IDS:
            path = f"/admin/r/{content_type.id}/{quote(value, safe='')}/"
            walk.ask("superuser", world.superuser, "get", path, expect=(404,))
    walk.assert_no_failures()


def test_no_page_answers_a_hostile_query_value_with_a_server_error(world):
    walk = Walk()
    pages = {route.name: route for route in routes()}
    for name, parameters in READS.items():
        path = fill(pages[name].pattern, world.valid)
        for who, client in (("manager", world.manager), ("superuser", world.superuser)):
            assert client.get(path).status_code < 400, path
            for parameter in parameters:
                for value in HOSTILE_QUERY:
                    walk.ask(who, client, "get", path, {parameter: value})
    walk.assert_no_failures()


def test_the_managers_actions_with_ids_that_are_not_ids(world):
    """ "Run now" (a score sync), "Replay" (a delivery) and a key's origins post an id in the
    form: one that is not an id of this workspace is a 404, never a 500."""
    walk = Walk()
    valid, other = world.valid, world.other
    workspace = valid["workspace_id"]
    forms = [
        (f"/w/{workspace}/automations/", {"action": "sync_run"}, "sync"),
        (f"/w/{workspace}/automations/{valid['automation_id']}/", {"action": "replay"}, "delivery"),
        (f"/w/{workspace}/health/", {"allowed_origins": ""}, "key_id"),
    ]
    for path, form, field in forms:
        others = other["delivery_id" if field == "delivery" else field]
        for value in [*HOSTILE_TEXT, str(HUGE), "0", "", others]:
            walk.ask("manager", world.manager, "post", path, {**form, field: value}, expect=(404,))
    walk.assert_no_failures()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=200))
def test_any_text_as_a_delivery_id_or_an_account_list_query(world, text):
    walk = Walk()
    valid = world.valid
    delivery = fill(
        "w/<workspace_id>/automations/<automation_id>/deliveries/<delivery_id>/",
        {**valid, "delivery_id": text},
    )
    walk.ask("manager", world.manager, "get", delivery, expect=(404,))
    accounts = f"/w/{valid['workspace_id']}/accounts/"
    for parameter in READS["dashboard:accounts"]:
        # 400: a NUL; 404: a segment id of no segment of this workspace.
        walk.ask(
            "manager", world.manager, "get", accounts, {parameter: text}, expect=(200, 400, 404)
        )
    walk.assert_no_failures()
