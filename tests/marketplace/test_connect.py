"""Connecting: the details check, the admin form and actions, permissions, operator commands."""

import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from engagement.models import ProductMembership
from marketplace import services
from marketplace.models import MarketplaceConnection, SyncRun
from tests.marketplace.conftest import (
    API,
    DEVELOPER_ID,
    EMAIL,
    LICENSES_URL,
    PRODUCT_ID,
    TOKEN,
    VENDOR_ID,
    connect,
    license_page,
    mock_vendor,
)

State = MarketplaceConnection.State


def check(**app):
    return services.connection_details_check(
        email=EMAIL, api_token=TOKEN, vendor_id=VENDOR_ID, **app
    )


@pytest.mark.parametrize(
    "app",
    [
        {"app_key": "com.example.timesheets"},
        {"app_name": "example timesheets"},
        {"product_id": PRODUCT_ID},
    ],
)
def test_details_check_finds_the_app_and_returns_its_product_id(mocked, app):
    mock_vendor(mocked)
    resolved = check(**app)
    assert (resolved.developer_id, resolved.product_id) == (DEVELOPER_ID, PRODUCT_ID)
    assert resolved.app_name == "Example Timesheets"


def test_unknown_app_lists_the_vendors_apps(mocked):
    mock_vendor(mocked)
    with pytest.raises(services.ConnectionDetailsError) as caught:
        check(app_key="com.example.missing")
    assert caught.value.field == "app"
    assert [a.app_name for a in caught.value.apps] == ["Example Timesheets", "Other App"]


def test_wrong_token_and_unknown_vendor_point_at_the_field(mocked):
    mocked.get(f"{API}/developer-space/vendor/{VENDOR_ID}", status=401)
    with pytest.raises(services.ConnectionDetailsError) as caught:
        check(app_key="x")
    assert caught.value.field == "api_token"
    mocked.replace("GET", f"{API}/developer-space/vendor/{VENDOR_ID}", status=404)
    with pytest.raises(services.ConnectionDetailsError) as caught:
        check(app_key="x")
    assert caught.value.field == "vendor_id" and "vendor ID" in caught.value.message


def test_vendor_id_must_be_the_number(mocked):
    with pytest.raises(services.ConnectionDetailsError, match="number at the end"):
        services.connection_details_check(
            email=EMAIL, api_token=TOKEN, vendor_id="vera", app_key="x"
        )
    assert len(mocked.calls) == 0


def test_marketplace_connect_command_connects_and_status_reports(acme, mocked, capsys):
    mock_vendor(mocked)
    call_command(
        "marketplace_connect",
        "--product",
        str(acme.product.id),
        "--email",
        EMAIL,
        "--token",
        TOKEN,
        "--vendor-id",
        VENDOR_ID,
        "--app-key",
        "com.example.timesheets",
    )
    out = capsys.readouterr().out
    assert PRODUCT_ID in out and TOKEN not in out
    connection = MarketplaceConnection.objects.get(product=acme.product)
    assert (connection.state, connection.marketplace_product_id) == (State.ACTIVE, PRODUCT_ID)
    assert connection.developer_id == DEVELOPER_ID

    call_command("marketplace_status", "--product", str(acme.product.id), "--json")
    status = json.loads(capsys.readouterr().out)
    assert status["state"] == "active" and status["schedule_enabled"] is True
    assert status["runs"][0]["trigger"] == "connected" and TOKEN not in json.dumps(status)


def test_marketplace_connect_with_an_unknown_app_fails_and_lists_apps(acme, mocked):
    mock_vendor(mocked)
    with pytest.raises(CommandError, match="Other App"):
        call_command(
            "marketplace_connect",
            "--product",
            str(acme.product.id),
            "--email",
            EMAIL,
            "--token",
            TOKEN,
            "--vendor-id",
            VENDOR_ID,
            "--app-name",
            "Nope",
        )
    assert not MarketplaceConnection.objects.exists()


def test_status_of_a_product_without_connection_is_not_configured(acme, capsys):
    call_command("marketplace_status", "--product", str(acme.product.id), "--json")
    assert json.loads(capsys.readouterr().out)["state"] == "not_configured"


# --- admin ----------------------------------------------------------------------------------
@pytest.fixture
def staff(django_user_model):
    def make(name: str, *, grant=None, role="manager", superuser=False):
        user = django_user_model.objects.create_user(
            name, password="pw", is_staff=True, is_superuser=superuser
        )
        if grant is not None:
            ProductMembership.objects.create(user=user, product=grant, role=role)
        return user

    return make


def admin_post(client, url, data):
    return client.post(url, data, follow=False)


def test_admin_connects_in_two_steps_picking_the_app(acme, staff, client, mocked):
    mock_vendor(mocked)
    client.force_login(staff("mia", grant=acme.product))
    add = reverse("admin:marketplace_marketplaceconnection_add")
    assert client.get(add).status_code == 200
    details = {
        "product": acme.product.id,
        "email": EMAIL,
        "api_token": TOKEN,
        "vendor_id": VENDOR_ID,
        "app": "",
        "runs-TOTAL_FORMS": 0,
        "runs-INITIAL_FORMS": 0,
    }
    first = client.post(add, details)
    assert first.status_code == 200  # the form again, now offering the apps
    page = first.content.decode()
    assert "Example Timesheets (com.example.timesheets)" in page and TOKEN not in page
    assert not MarketplaceConnection.objects.exists()

    second = client.post(add, {**details, "app": PRODUCT_ID})
    assert second.status_code == 302
    connection = MarketplaceConnection.objects.get(product=acme.product)
    assert connection.state == State.ACTIVE and connection.api_token == TOKEN
    assert SyncRun.objects.filter(connection=connection, trigger="connected").count() == 1
    change = client.get(
        reverse("admin:marketplace_marketplaceconnection_change", args=[connection.id])
    )
    assert change.status_code == 200 and TOKEN not in change.content.decode()


def test_admin_shows_the_marketplaces_answer_for_a_bad_token(acme, staff, client, mocked):
    mocked.get(f"{API}/developer-space/vendor/{VENDOR_ID}", status=401)
    client.force_login(staff("mia", grant=acme.product))
    response = client.post(
        reverse("admin:marketplace_marketplaceconnection_add"),
        {
            "product": acme.product.id,
            "email": EMAIL,
            "api_token": "wrong",
            "vendor_id": VENDOR_ID,
            "app": "x",
            "runs-TOTAL_FORMS": 0,
            "runs-INITIAL_FORMS": 0,
        },
    )
    assert (
        response.status_code == 200
        and "rejected the email and API token" in response.content.decode()
    )
    assert not MarketplaceConnection.objects.exists()


def test_only_the_products_managers_see_its_connection(acme, globex, staff, client):
    acme_connection = connect(acme)
    connect(globex)
    changelist = reverse("admin:marketplace_marketplaceconnection_changelist")
    acme_change = reverse(
        "admin:marketplace_marketplaceconnection_change", args=[acme_connection.id]
    )

    client.force_login(staff("gus", grant=globex.product))
    page = client.get(changelist).content.decode()
    assert "Globex" in page and "Acme" not in page
    assert client.get(acme_change).status_code in (302, 403, 404)

    client.force_login(staff("nia", grant=acme.product, role="viewer"))
    assert client.get(changelist).status_code == 403

    client.force_login(staff("root", superuser=True))
    page = client.get(changelist).content.decode()
    assert "Globex" in page and "Acme" in page


def test_admin_actions_sync_now_test_and_disconnect(acme, staff, client, mocked):
    connection = connect(acme)
    SyncRun.objects.filter(connection=connection).update(outcome="succeeded")
    client.force_login(staff("mia", grant=acme.product))
    changelist = reverse("admin:marketplace_marketplaceconnection_changelist")

    def act(action):
        return client.post(
            changelist, {"action": action, "_selected_action": [connection.id]}, follow=True
        ).content.decode()

    assert "Sync started" in act("sync_now")
    assert SyncRun.objects.filter(connection=connection, trigger="manual").count() == 1

    mock_vendor(mocked)
    mocked.get(LICENSES_URL, json=license_page([], total=42))
    assert "Connection works: Example Timesheets" in act("test_connection")
    assert "42 licenses" in act("test_connection")
    mocked.replace("GET", LICENSES_URL, status=403)
    assert "license reporting" in act("test_connection")

    assert "Disconnected 1" in act("disconnect")
    assert MarketplaceConnection.objects.get(id=connection.id).state == State.DISCONNECTED
