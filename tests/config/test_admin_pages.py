"""Every registered admin model, as a superuser sees it: the list, the add page and a change page
answer without a server error, and every form the admin offers saves (no 500, no IntegrityError).

Objects come from the services (and a few plain creates for records only workers write). The
form is posted back as rendered, with what a person would fill in on an add page.
"""

from datetime import date

import pytest
import responses
from django import forms
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import (
    ClockedSchedule,
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
    SolarSchedule,
)

import engagement.admin
import ingestion.admin
import readapi.admin
from automations.services import automation_create, automation_test_send
from engagement.erasure import erasure_request
from engagement.models import Segment, SegmentMember
from engagement.scoring import workspace_rescore
from ingestion.models import AcceptedRequest, DroppedRequest
from ingestion.services.dedup import seen_messages_claim
from readapi.models import ApiToken
from tests.engagement.helpers import apply, group, identify, track
from tests.marketplace.conftest import BASE, PRODUCT_ID, TOKEN, connect, mock_vendor

AXES_INSTALLED = apps.is_installed("axes")

# What a person types on each add page the admin offers (the rest is the form's own initial).
ADD_DATA = {
    "auth.group": lambda o: {"name": "Viewers"},
    "auth.user": lambda o: {
        "username": "newbie",
        "password1": "a-Long-passw0rd!x",
        "password2": "a-Long-passw0rd!x",
        "usable_password": "true",
    },
    "django_celery_beat.periodictask": lambda o: {
        "name": "purge activity by hand",
        "regtask": "engagement.tasks.event_activity_purge",
        "interval": o["interval"].id,
    },
    "django_celery_beat.clockedschedule": lambda o: {
        "clocked_time_0": "2030-01-01",
        "clocked_time_1": "10:00:00",
    },
    "django_celery_beat.crontabschedule": lambda o: {"minute": "5"},
    "django_celery_beat.solarschedule": lambda o: {
        "event": "sunrise",
        "latitude": "48.85",
        "longitude": "2.35",
    },
    "django_celery_beat.intervalschedule": lambda o: {"every": "7", "period": "minutes"},
    "engagement.product": lambda o: {"name": "Initech"},
    "engagement.workspace": lambda o: {"product": o["acme"].product.id, "name": "Cloud only"},
    "engagement.segment": lambda o: {
        "workspace": o["acme"].workspace.id,
        "name": "Active",
        "target": "accounts",
        "conditions": '[{"field": "trait:am.status", "operator": "equals", "value": "active"}]',
    },
    "ingestion.ingestionkey": lambda o: {"product": o["acme"].product.id, "label": "rotation"},
    "readapi.apitoken": lambda o: {"product": o["acme"].product.id, "name": "BI"},
    "automations.automation": lambda o: {
        "workspace": o["acme"].workspace.id,
        "name": "Red hot",
        "trigger": "score_changed",
        "target": "accounts",
        "threshold": "10",
        "conditions": "[]",
        "match": "all",
        "destination": "webhook",
        "cooldown_seconds": "86400",
        "receiver_url": "http://127.0.0.1:9/hook",
    },
    "automations.traitsync": lambda o: {
        "workspace": o["acme"].workspace.id,
        "host": "http://127.0.0.1:9",
        "new_write_key": "wk",
        "interval_minutes": "60",
        "prefix": "eds_",
    },
    "marketplace.marketplaceconnection": lambda o: {
        "product": o["globex"].product.id,
        "email": "vera@example.com",
        "api_token": TOKEN,
        "vendor_id": "1212",
        "app": PRODUCT_ID,
    },
}
# Fields a change form never renders back (write-only), filled in again as a person would.
CHANGE_DATA = {
    "marketplace.marketplaceconnection": lambda o: {"api_token": TOKEN, "app": PRODUCT_ID},
}


@pytest.fixture
def objects(acme, globex, admin_user, client, settings):
    """One object of every registered model."""
    settings.MARKETPLACE_API_URL = BASE
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = True
    apply(
        acme,
        identify("u1", {"name": "Ada", "email": "ada@example.com"}),
        group("u1", "A1", {"name": "Acme Corp", "domain": "acme.test", "am.status": "active"}),
        track("u1", "Login", account="A1"),
        identify("u2", {"name": "Bo", "email": "bo@example.com"}),
    )
    # An erasure asked with suppression: its record and the suppression it leaves.
    erasure_request(
        product_id=acme.product.id,
        kind="user",
        target_id=acme.product.users.get(tracking_id="u2").id,
        suppress=True,
        via="admin",
        admin_user_id=admin_user.id,
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    segment = Segment.objects.create(workspace=acme.workspace, name="All", target="accounts")
    account = acme.product.accounts.get()
    SegmentMember.objects.create(segment=segment, account=account, joined_at=timezone.now())
    connection = connect(acme)  # also a sync run, a periodic task and its interval
    seen_messages_claim(product_id=acme.product.id, message_ids=["m-1"])
    AcceptedRequest.objects.create(
        received_at=timezone.now(), endpoint="v2/track", key_digest=acme.key.digest, messages=[]
    )
    DroppedRequest.objects.create(
        product=acme.product,
        endpoint="v2/track",
        reason=DroppedRequest.Reason.choices[0][0],
        received_at=timezone.now(),
    )
    automation = automation_create(
        workspace=acme.workspace, trigger="new_account", url="http://127.0.0.1:9/hook"
    )
    automation_test_send(automation=automation)
    Group.objects.create(name="Operators")
    ClockedSchedule.objects.create(clocked_time=timezone.now())
    CrontabSchedule.objects.create(minute="0", hour="3")
    SolarSchedule.objects.create(event="sunset", latitude="51.5", longitude="-0.1")
    # A failed login (axes' attempt) and a successful one (its access log).
    Client().post("/admin/login/", {"username": "intruder", "password": "wrong"})
    Client().post("/admin/login/", {"username": admin_user.username, "password": "password"})
    if AXES_INSTALLED:
        from axes.models import AccessFailureLog

        AccessFailureLog.objects.create(
            username="intruder", ip_address="127.0.0.1", user_agent="", path_info="/admin/login/"
        )
    return {
        "acme": acme,
        "globex": globex,
        "admin": admin_user,
        "connection": connection,
        "interval": IntervalSchedule.objects.first(),
        "periodic_task": PeriodicTask.objects.first(),
    }


def registered() -> list[str]:
    return sorted(model._meta.label_lower for model in admin.site._registry)


def test_every_registered_model_is_covered_here():
    """A model registered later needs its add data here, or this test names it."""
    addable = {"auth.group", "auth.user", *ADD_DATA}
    axes = {"axes.accessattempt", "axes.accesslog", "axes.accessfailurelog"}
    read_only_or_ingested = (axes if AXES_INSTALLED else set()) | {
        "engagement.user",
        "engagement.account",
        "engagement.segmentmember",
        "engagement.erasure",
        "engagement.suppression",
        "ingestion.droppedrequest",
        "ingestion.acceptedrequest",
        "ingestion.seenmessage",
        "marketplace.syncrun",
        "automations.delivery",
    }
    assert set(registered()) == addable | read_only_or_ingested


def _field_data(form: forms.BaseForm) -> dict:
    """What the browser sends back for this form, untouched."""
    data = {}
    for name, field in form.fields.items():
        if field.disabled:
            continue
        bound = form[name]
        widget = field.widget
        value = bound.value()
        if isinstance(widget, forms.MultiWidget):
            parts = value if isinstance(value, list | tuple) else widget.decompress(value)
            for suffix, sub, part in zip(widget.widgets_names, widget.widgets, parts, strict=False):
                formatted = sub.format_value(part)
                data[f"{bound.html_name}{suffix}"] = "" if formatted is None else formatted
        elif isinstance(field, forms.MultipleChoiceField | forms.ModelMultipleChoiceField):
            data[bound.html_name] = [str(v) for v in value or []]
        elif isinstance(field, forms.BooleanField):
            if value:
                data[bound.html_name] = "on"
        elif value is None:
            data[bound.html_name] = ""
        elif isinstance(value, list | tuple):
            data[bound.html_name] = [str(v) for v in value]
        elif isinstance(value, date):
            data[bound.html_name] = widget.format_value(value)
        else:
            data[bound.html_name] = value
    return data


def rendered_form_data(response) -> dict:
    """The admin form and its inline formsets as rendered, ready to post back."""
    context = response.context
    data = _field_data(context["adminform"].form)
    for inline in context["inline_admin_formsets"]:
        formset = inline.formset
        management = formset.management_form
        for name in management.fields:
            data[management.add_prefix(name)] = management[name].value()
        for form in formset.forms:
            data.update(_field_data(form))
    return data


def errors_of(response) -> str:
    context = response.context
    found = [context["adminform"].form.errors]
    found += [inline.formset.errors for inline in context["inline_admin_formsets"]]
    found += [inline.formset.non_form_errors() for inline in context["inline_admin_formsets"]]
    return repr(found)


def first_listed(model_admin, request):
    """The first row the admin lists to this user: a row another test left committed in the
    database, outside this user's products, is not one to open (the admin redirects)."""
    return model_admin.get_queryset(request).order_by("pk").first()


@pytest.fixture
def marketplace_answers():
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        mock_vendor(rsps)
        yield rsps


@pytest.mark.parametrize("label", registered())
def test_list_add_and_change_pages_answer_and_save(
    label, objects, admin_client, rf, marketplace_answers
):
    model = next(m for m in admin.site._registry if m._meta.label_lower == label)
    model_admin = admin.site._registry[model]
    info = (model._meta.app_label, model._meta.model_name)
    request = rf.get("/")
    request.user = objects["admin"]

    changelist = admin_client.get(reverse("admin:{}_{}_changelist".format(*info)))
    assert changelist.status_code == 200

    add_url = reverse("admin:{}_{}_add".format(*info))
    add_page = admin_client.get(add_url)
    if model_admin.has_add_permission(request):
        assert add_page.status_code == 200
        assert label in ADD_DATA, f"{label} offers an add page: add its data to ADD_DATA"
        before = model._default_manager.count()
        saved = admin_client.post(
            add_url, {**rendered_form_data(add_page), **ADD_DATA[label](objects)}
        )
        assert saved.status_code == 302, errors_of(saved)
        assert model._default_manager.count() == before + 1
    else:
        assert add_page.status_code == 403

    obj = first_listed(model_admin, request)
    assert obj is not None, f"no {label} to open"
    # Quoted as the admin quotes a key in its own links: a delivery's "msg_<hex>" would otherwise
    # read as an escape when its hex starts with 22-26 or 40 ("msg_23..." is "msg#...").
    change_url = reverse("admin:{}_{}_change".format(*info), args=[quote(obj.pk)])
    change_page = admin_client.get(change_url)
    assert change_page.status_code == 200
    if model_admin.has_change_permission(request, obj):
        extra = CHANGE_DATA.get(label, lambda o: {})(objects)
        saved = admin_client.post(change_url, {**rendered_form_data(change_page), **extra})
        assert saved.status_code == 302, errors_of(saved)
    else:
        assert admin_client.post(change_url, {}).status_code == 403


def test_accounts_and_users_are_not_added_or_edited_in_the_admin(objects, admin_client):
    for name in ("account", "user"):
        assert admin_client.get(f"/admin/engagement/{name}/add/").status_code == 403
        page = admin_client.get(f"/admin/engagement/{name}/").content.decode()
        assert f"/admin/engagement/{name}/add/" not in page


def test_products_keys_and_tokens_are_created_and_revoked_by_the_services(
    acme, admin_client, monkeypatch
):
    calls = []

    def spy(module, name):
        real = getattr(module, name)

        def wrapper(**kwargs):
            calls.append(name)
            return real(**kwargs)

        monkeypatch.setattr(module, name, wrapper)

    spy(engagement.admin, "product_create")
    spy(readapi.admin, "api_token_create")
    spy(readapi.admin, "api_token_revoke")
    spy(ingestion.admin, "ingestion_key_create")
    spy(ingestion.admin, "ingestion_key_revoke")
    product = {"product": acme.product.id}
    for url, data in [
        ("/admin/engagement/product/add/", {"name": "Hooli"}),
        ("/admin/readapi/apitoken/add/", {**product, "name": "BI"}),
        ("/admin/ingestion/ingestionkey/add/", {**product, "label": "rotation"}),
    ]:
        assert admin_client.post(url, data).status_code == 302
    tokens = list(ApiToken.objects.filter(product=acme.product).values_list("id", flat=True))
    for url, ids in [
        ("/admin/readapi/apitoken/", tokens),
        ("/admin/ingestion/ingestionkey/", [acme.key.id]),
    ]:
        response = admin_client.post(url, {"action": "revoke", "_selected_action": ids})
        assert response.status_code == 302
    assert calls == [
        "product_create",
        "api_token_create",
        "ingestion_key_create",
        "api_token_revoke",
        "api_token_revoke",
        "ingestion_key_revoke",
    ]
    assert not ApiToken.objects.filter(product=acme.product, revoked_at__isnull=True).exists()
