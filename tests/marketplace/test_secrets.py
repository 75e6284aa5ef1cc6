"""The API token never appears on a page: not on any marketplace admin page, not on Django's
debug page when a save fails with DEBUG on (marked sensitive), and DEBUG is off by default."""

import base64
import os
import subprocess
import sys

import pytest
from django.test import Client
from django.urls import reverse

from marketplace import services
from marketplace.client import MarketplaceClient
from marketplace.models import SyncRun
from tests.marketplace.conftest import EMAIL, PRODUCT_ID, TOKEN, VENDOR_ID, connect, mock_vendor

FORMS = {"runs-TOTAL_FORMS": 0, "runs-INITIAL_FORMS": 0}


def token_forms() -> list[str]:
    """The token as typed, and as it travels in the Authorization header."""
    return [TOKEN, base64.b64encode(f"{EMAIL}:{TOKEN}".encode()).decode()]


def assert_no_token(page: str) -> None:
    for form in token_forms():
        assert form not in page


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw")


def test_no_marketplace_admin_page_contains_the_token(acme, root, client, mocked):
    connection = connect(acme)
    run = SyncRun.objects.get(connection=connection)
    client.force_login(root)
    urls = [reverse("admin:index"), reverse("admin:app_list", args=["marketplace"])]
    for model in ("marketplaceconnection", "syncrun"):
        urls.append(reverse(f"admin:marketplace_{model}_changelist"))
    urls += [
        reverse("admin:marketplace_marketplaceconnection_add"),
        reverse("admin:marketplace_marketplaceconnection_change", args=[connection.id]),
        reverse("admin:marketplace_marketplaceconnection_history", args=[connection.id]),
        reverse("admin:marketplace_marketplaceconnection_delete", args=[connection.id]),
        reverse("admin:marketplace_syncrun_change", args=[run.id]),
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert_no_token(response.content.decode())

    # A save the marketplace refuses re-renders the form: the token is not filled back in.
    mock_vendor(mocked)
    change = reverse("admin:marketplace_marketplaceconnection_change", args=[connection.id])
    page = client.post(
        change, {"email": EMAIL, "api_token": TOKEN, "vendor_id": VENDOR_ID, "app": "?", **FORMS}
    )
    assert page.status_code == 200 and "No app" in page.content.decode()
    assert_no_token(page.content.decode())


@pytest.mark.parametrize("where", ["listing", "configure"])
def test_the_debug_page_of_a_failed_save_never_shows_the_token(
    acme, root, settings, mocked, monkeypatch, where
):
    settings.DEBUG = True
    mock_vendor(mocked)

    def broken(*args, **kwargs):
        raise RuntimeError("an unexpected failure")

    if where == "listing":  # inside the details check, with the token in the caller's frames
        monkeypatch.setattr(MarketplaceClient, "apps", broken)
    else:  # inside the save, after the details check
        monkeypatch.setattr(services, "connection_schedule_keep_in_step", broken)
    client = Client(raise_request_exception=False)
    client.force_login(root)
    response = client.post(
        reverse("admin:marketplace_marketplaceconnection_add"),
        {
            "product": acme.product.id,
            "email": EMAIL,
            "api_token": TOKEN,
            "vendor_id": VENDOR_ID,
            "app": PRODUCT_ID,
            **FORMS,
        },
    )
    page = response.content.decode()
    assert response.status_code == 500 and "an unexpected failure" in page  # the debug page
    assert "api_token" in page and "********" in page  # the token's place is masked
    assert_no_token(page)


def test_debug_is_off_unless_the_developer_turns_it_on(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "DJANGO_ENV"}}
    env.update(ENV_FILE=os.devnull, DATA_DIR=str(tmp_path))
    show = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings');"
        "django.setup(); from django.conf import settings; print(settings.DEBUG)"
    )

    def debug(**extra) -> str:
        result = subprocess.run(
            [sys.executable, "-c", show], env={**env, **extra}, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.split()[-1]

    assert debug() == "False"
    assert debug(DEBUG="1") == "True"


def test_a_listing_of_an_unexpected_shape_is_a_form_error_not_a_server_error(
    acme, root, client, mocked
):
    from tests.marketplace.conftest import API, DEVELOPER_ID

    mocked.get(f"{API}/developer-space/vendor/{VENDOR_ID}", json={"developerId": DEVELOPER_ID})
    mocked.get(
        f"{API}/product-listing/developer-space/{DEVELOPER_ID}", json={"links": "?", "items": 3}
    )
    client.force_login(root)
    response = client.post(
        reverse("admin:marketplace_marketplaceconnection_add"),
        {
            "product": acme.product.id,
            "email": EMAIL,
            "api_token": TOKEN,
            "vendor_id": VENDOR_ID,
            "app": "",
            **FORMS,
        },
    )
    page = response.content.decode()
    assert response.status_code == 200 and "unexpected shape" in page
    assert_no_token(page)
