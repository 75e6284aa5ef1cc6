"""Credential health: each connection keeps the day its API token was set; from 330 days the
connection page and the dashboard's health page warn, and /metrics exposes the token's age."""

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection as db
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse
from django.utils import timezone
from prometheus_client import CollectorRegistry

from engagement.models import ProductMembership
from marketplace import services
from marketplace.metrics import ConnectionCollector
from marketplace.models import MarketplaceConnection
from tests.marketplace.conftest import (
    EMAIL,
    LICENSES_URL,
    TOKEN,
    VENDOR_ID,
    connect,
    mock_vendor,
    run_until_done,
)

FORMS = {"runs-TOTAL_FORMS": 0, "runs-INITIAL_FORMS": 0}


class Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


def days_ago(days: int):
    return timezone.localdate() - timedelta(days=days)


def connect_command(acme, *extra):
    call_command(
        "marketplace_connect",
        "--product", str(acme.product.id), "--email", EMAIL, "--vendor-id", VENDOR_ID,
        "--app-key", "com.example.timesheets", *extra, stdin=Pipe(TOKEN + "\n"),
    )  # fmt: skip


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw")


def test_saving_a_token_sets_its_day_to_today(acme):
    assert connect(acme).token_set_on == timezone.localdate()


def test_the_command_takes_the_day_the_token_was_set(acme, mocked, monkeypatch, capsys):
    monkeypatch.delenv("MARKETPLACE_API_TOKEN", raising=False)
    mock_vendor(mocked)
    day = days_ago(100)
    connect_command(acme, "--token-set-on", day.isoformat())
    assert MarketplaceConnection.objects.get(product=acme.product).token_set_on == day
    assert f"token set on {day.isoformat()}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("2026-02-30", "not a day"),
        ("30.01.2026", "not a day"),
        ("2026-1-5", "not a day"),
        ("yesterday", "not a day"),
        ((timezone.localdate() + timedelta(days=1)).isoformat(), "in the future"),
    ],
)
def test_a_bad_token_day_is_refused_before_anything_is_asked_or_stored(
    acme, mocked, monkeypatch, value, says
):
    monkeypatch.delenv("MARKETPLACE_API_TOKEN", raising=False)
    mock_vendor(mocked)
    with pytest.raises(CommandError, match=says):
        connect_command(acme, "--token-set-on", value)
    assert len(mocked.calls) == 0
    assert not MarketplaceConnection.objects.filter(product=acme.product).exists()


def test_the_admin_changes_the_day_without_the_token_being_typed_again(acme, root, client):
    connection = connect(acme)
    client.force_login(root)
    change = reverse("admin:marketplace_marketplaceconnection_change", args=[connection.id])
    day = days_ago(200)

    response = client.post(
        change,
        {"email": EMAIL, "vendor_id": VENDOR_ID, "app": "Example Timesheets",
         "token_set_on": day.isoformat(), **FORMS},
    )  # fmt: skip

    errors = response.context and response.context["adminform"].form.errors
    assert response.status_code == 302, errors
    connection.refresh_from_db()
    assert connection.token_set_on == day
    assert connection.api_token == TOKEN and connection.state == "active"


def test_the_admin_refuses_new_details_without_the_token_and_a_future_day(acme, root, client):
    connection = connect(acme)
    client.force_login(root)
    change = reverse("admin:marketplace_marketplaceconnection_change", args=[connection.id])
    other_email = {
        "email": "new@vendor.example", "vendor_id": VENDOR_ID, "app": "Example Timesheets",
        "token_set_on": days_ago(1).isoformat(),
    }  # fmt: skip
    page = client.post(change, {**other_email, **FORMS})
    assert page.status_code == 200 and "Enter the token to change" in page.content.decode()

    future = (timezone.localdate() + timedelta(days=3)).isoformat()
    page = client.post(
        change,
        {"email": EMAIL, "vendor_id": VENDOR_ID, "app": "Example Timesheets",
         "token_set_on": future, **FORMS},
    )  # fmt: skip
    assert page.status_code == 200 and "in the future" in page.content.decode()
    connection.refresh_from_db()
    assert connection.email == EMAIL and connection.token_set_on == timezone.localdate()


def test_a_new_token_saved_in_the_admin_counts_from_today(acme, root, client, mocked):
    connection = connect(acme)
    MarketplaceConnection.objects.filter(id=connection.id).update(token_set_on=days_ago(340))
    mock_vendor(mocked)
    mocked.get(LICENSES_URL, json={"licenses": []})
    client.force_login(root)
    change = reverse("admin:marketplace_marketplaceconnection_change", args=[connection.id])
    page = client.get(change)
    initial = page.context["adminform"].form["token_set_on"].value()

    response = client.post(
        change,
        {"email": EMAIL, "api_token": "a-new-token", "vendor_id": VENDOR_ID,
         "app": "Example Timesheets", "token_set_on": initial, **FORMS},
    )  # fmt: skip

    assert response.status_code == 302
    connection.refresh_from_db()
    assert connection.api_token == "a-new-token"
    assert connection.token_set_on == timezone.localdate()


@pytest.mark.parametrize(("age", "warned"), [(329, False), (330, True), (400, True)])
def test_the_connection_page_warns_from_330_days(acme, root, client, age, warned):
    connection = connect(acme)
    MarketplaceConnection.objects.filter(id=connection.id).update(token_set_on=days_ago(age))
    client.force_login(root)

    page = client.get(
        reverse("admin:marketplace_marketplaceconnection_change", args=[connection.id])
    )

    html = page.content.decode()
    assert page.status_code == 200 and f"{age} days (set on {days_ago(age).isoformat()})" in html
    assert ("Atlassian API tokens expire within a year" in html) is warned


@pytest.mark.parametrize(("age", "warned"), [(329, False), (330, True)])
def test_the_health_page_warns_from_330_days(acme, django_user_model, client, age, warned):
    connection = connect(acme)
    MarketplaceConnection.objects.filter(id=connection.id).update(token_set_on=days_ago(age))
    viewer = django_user_model.objects.create_user("vic", password="pw")
    ProductMembership.objects.create(user=viewer, product=acme.product)
    client.force_login(viewer)

    page = client.get(f"/w/{acme.workspace.id}/health/")

    assert page.status_code == 200
    html = page.content.decode()
    assert (f"{age} days ago; Atlassian API tokens expire within a year" in html) is warned


def test_metrics_expose_the_token_age_in_days_and_none_without_a_token(acme, globex):
    connect(acme)
    MarketplaceConnection.objects.filter(product=acme.product).update(token_set_on=days_ago(42))
    gone = connect(globex)
    services.connections_disconnect(connection_ids=[gone.id])
    registry = CollectorRegistry()
    registry.register(ConnectionCollector())

    age = "eds_marketplace_token_age_days"
    assert registry.get_sample_value(age, {"product": str(acme.product.id)}) == 42
    assert registry.get_sample_value(age, {"product": str(globex.product.id)}) is None


def test_a_401_still_requires_authentication_whatever_the_token_age(acme, mocked):
    mocked.get(LICENSES_URL, status=401)
    connection = connect(acme)
    run_until_done(connection.runs.get().id)
    connection.refresh_from_db()
    assert connection.state == MarketplaceConnection.State.REQUIRES_AUTHENTICATION


@pytest.mark.django_db(transaction=True)
def test_existing_connections_take_the_day_their_details_were_last_saved():
    before = [("marketplace", "0004_connection_api_url")]
    after = [("marketplace", "0006_token_day_and_full_resync")]
    executor = MigrationExecutor(db)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    product = old.get_model("engagement", "Product")
    connection_model = old.get_model("marketplace", "MarketplaceConnection")
    run_model = old.get_model("marketplace", "SyncRun")
    saved = connection_model.objects.create(
        product=product.objects.create(name="Saved"), api_token="t", state="active",
        full_sync_completed_at=timezone.now(),
    )  # fmt: skip
    for started, trigger in [(300, "connected"), (200, "connected"), (10, "scheduled")]:
        run_model.objects.create(
            connection=saved, trigger=trigger, mode="full",
            started_at=timezone.now() - timedelta(days=started),
        )  # fmt: skip
    no_runs = connection_model.objects.create(
        product=product.objects.create(name="No runs"), api_token="t", state="active"
    )
    connection_model.objects.filter(id=no_runs.id).update(
        created_at=timezone.now() - timedelta(days=500)
    )
    gone = connection_model.objects.create(
        product=product.objects.create(name="Gone"), api_token="", state="disconnected"
    )

    executor = MigrationExecutor(db)
    executor.migrate(after)
    new = executor.loader.project_state(after).apps.get_model(
        "marketplace", "MarketplaceConnection"
    )

    def day(days_before: int):
        return (timezone.now() - timedelta(days=days_before)).date()

    # the latest "Details saved" run, not a later scheduled one; else the day it was created
    assert new.objects.get(id=saved.id).token_set_on == day(200)
    assert new.objects.get(id=no_runs.id).token_set_on == day(500)
    assert new.objects.get(id=gone.id).token_set_on is None
    # every connection's next scheduled sync is a full one: the transactions are read once
    assert not new.objects.filter(full_sync_completed_at__isnull=False).exists()
    executor = MigrationExecutor(db)
    executor.migrate(executor.loader.graph.leaf_nodes())
