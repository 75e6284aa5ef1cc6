"""Staff manage tenants in the admin: products, ingestion keys (rotation) and API tokens."""

import re

import pytest

from engagement.models import Product
from ingestion.models import IngestionKey
from readapi.models import ApiToken, hash_token

# The demo login's admin is the embedded mode's, on SQLite.
pytestmark = pytest.mark.both_databases


@pytest.mark.parametrize(
    "path", ["/admin/", "/admin/engagement/product/", "/admin/ingestion/ingestionkey/add/"]
)
def test_the_admin_requires_a_staff_login(client, db, path):
    response = client.get(path)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_staff_creates_a_product_and_it_gets_a_default_workspace(admin_client):
    response = admin_client.post("/admin/engagement/product/add/", {"name": "Initech"})

    assert response.status_code == 302
    product = Product.objects.get(name="Initech")
    assert list(product.workspaces.values_list("name", flat=True)) == ["Default"]


def test_staff_adds_a_second_key_and_revokes_the_first(acme, admin_client):
    response = admin_client.post(
        "/admin/ingestion/ingestionkey/add/", {"product": acme.product.id, "label": "rotation"}
    )
    assert response.status_code == 302
    assert IngestionKey.objects.filter(product=acme.product, revoked_at__isnull=True).count() == 2

    response = admin_client.post(
        "/admin/ingestion/ingestionkey/",
        {"action": "revoke", "_selected_action": [acme.key.id]},
    )
    assert response.status_code == 302
    active = IngestionKey.objects.filter(product=acme.product, revoked_at__isnull=True)
    assert list(active.values_list("label", flat=True)) == ["rotation"]


def test_a_token_is_shown_once_and_stored_hashed(acme, admin_client):
    response = admin_client.post(
        "/admin/readapi/apitoken/add/",
        {"product": acme.product.id, "name": "BI export"},
        follow=True,
    )

    assert response.status_code == 200
    shown = re.findall(r"eds_[A-Za-z0-9_\-]{32,}", response.content.decode())
    assert len(shown) == 1
    token = ApiToken.objects.get(name="BI export")
    assert token.token_hash == hash_token(shown[0])

    again = admin_client.get(f"/admin/readapi/apitoken/{token.id}/change/")
    assert shown[0] not in again.content.decode()


def test_staff_revokes_a_token(acme, admin_client):
    token = ApiToken.objects.get(product=acme.product)
    response = admin_client.post(
        "/admin/readapi/apitoken/", {"action": "revoke", "_selected_action": [token.id]}
    )

    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None


# The README sends a newcomer signed in as `demo` (config/demo_login.py: staff, manager of the
# demo product, never a superuser) to these admin pages.
README_ADMIN_PAGES = [
    "/admin/",
    "/admin/engagement/product/",
    "/admin/ingestion/ingestionkey/",
    "/admin/ingestion/ingestionkey/add/",
    "/admin/readapi/apitoken/",
    "/admin/readapi/apitoken/add/",
    "/admin/ingestion/droppedrequest/",
    "/admin/ingestion/acceptedrequest/",
    "/admin/marketplace/marketplaceconnection/",
]


@pytest.fixture
def demo(acme, globex, settings, tmp_path):
    """The demo login of `make run`, manager of Acme, signed in through the admin's login page;
    Globex has a dropped and an accepted request too."""
    from django.test import Client
    from django.utils import timezone

    from config.demo_login import demo_login_ensure
    from ingestion.models import AcceptedRequest, DroppedRequest

    settings.DATA_DIR = tmp_path
    login = demo_login_ensure(product=acme.product)
    now = timezone.now()
    for tenant in (acme, globex):
        name = tenant.product.name
        DroppedRequest.objects.create(
            product=tenant.product,
            endpoint="v2-track",
            reason=DroppedRequest.Reason.INVALID_MESSAGE,
            detail=f"{name} dropped",
            received_at=now,
        )
        AcceptedRequest.objects.create(
            received_at=now, endpoint=f"{name[:8]}-track", key_digest=tenant.key.digest, messages=[]
        )
    client = Client()
    response = client.post(
        "/admin/login/?next=/admin/", {"username": login.username, "password": login.password}
    )
    assert response.status_code == 302 and response["Location"] == "/admin/"
    return client


@pytest.mark.parametrize("path", README_ADMIN_PAGES)
def test_the_demo_login_opens_every_admin_page_the_readme_names_with_its_own_rows(demo, acme, path):
    response = demo.get(path)

    assert response.status_code == 200
    assert "Globex" not in response.content.decode()  # no row, filter or choice of Globex's


def test_the_demo_login_sees_acme_rows_and_no_other_product(demo, acme):
    lists = {
        path: demo.get(path).context["cl"].result_count
        for path in (
            "/admin/engagement/product/",
            "/admin/ingestion/ingestionkey/",
            "/admin/readapi/apitoken/",
            "/admin/ingestion/droppedrequest/",
            "/admin/ingestion/acceptedrequest/",
        )
    }
    assert set(lists.values()) == {1}
    accepted = demo.get("/admin/ingestion/acceptedrequest/").content.decode()
    assert "Acme-track" in accepted
    product = demo.get(f"/admin/engagement/product/{acme.product.id}/change/")
    assert product.status_code == 200
    # Its members, read-only: the inline lists the demo login's own membership.
    members = product.context["inline_admin_formsets"][0].formset.queryset
    assert [m.user.username for m in members] == ["demo"]


def test_the_demo_login_adds_and_revokes_its_products_keys_and_tokens(demo, acme, globex):
    added = demo.post(
        "/admin/ingestion/ingestionkey/add/", {"product": acme.product.id, "label": "rotation"}
    )
    assert added.status_code == 302
    assert IngestionKey.objects.filter(product=acme.product, label="rotation").exists()

    revoked = demo.post(
        "/admin/ingestion/ingestionkey/",
        {"action": "revoke", "_selected_action": [acme.key.id, globex.key.id]},
    )
    assert revoked.status_code == 302
    acme.key.refresh_from_db()
    globex.key.refresh_from_db()
    assert acme.key.revoked_at is not None and globex.key.revoked_at is None

    token_page = demo.post(
        "/admin/readapi/apitoken/add/",
        {"product": acme.product.id, "name": "BI export"},
        follow=True,
    )
    assert token_page.status_code == 200
    assert len(re.findall(r"eds_[A-Za-z0-9_\-]{32,}", token_page.content.decode())) == 1
    token = ApiToken.objects.get(name="BI export")
    assert token.product == acme.product
    demo.post("/admin/readapi/apitoken/", {"action": "revoke", "_selected_action": [token.id]})
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_the_demo_login_cannot_touch_another_products_rows(demo, acme, globex):
    refused = demo.post(
        "/admin/ingestion/ingestionkey/add/", {"product": globex.product.id, "label": "mine now"}
    )
    assert refused.status_code == 200 and "product" in refused.context["adminform"].form.errors
    refused = demo.post(
        "/admin/readapi/apitoken/add/", {"product": globex.product.id, "name": "mine now"}
    )
    assert refused.status_code == 200 and "product" in refused.context["adminform"].form.errors
    assert not IngestionKey.objects.filter(label="mine now").exists()
    assert not ApiToken.objects.filter(name="mine now").exists()

    globex_token = ApiToken.objects.get(product=globex.product)
    for path in (
        f"/admin/engagement/product/{globex.product.id}/change/",
        f"/admin/ingestion/ingestionkey/{globex.key.id}/change/",
        f"/admin/readapi/apitoken/{globex_token.id}/change/",
    ):
        response = demo.get(path)
        assert response.status_code == 302 and response["Location"] == "/admin/"
    renamed = demo.post(f"/admin/engagement/product/{globex.product.id}/change/", {"name": "Taken"})
    assert renamed.status_code == 302
    assert Product.objects.get(id=globex.product.id).name == "Globex"
    # Nothing is deleted from the admin by a manager (keys and tokens are revoked instead),
    # and products are added by superusers.
    assert demo.get("/admin/engagement/product/add/").status_code == 403
    keys = demo.get("/admin/ingestion/ingestionkey/")
    assert "delete_selected" not in keys.content.decode()


def test_the_demo_login_renames_its_product(demo, acme):
    response = demo.post(
        f"/admin/engagement/product/{acme.product.id}/change/",
        {
            "name": "Acme Cloud",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )

    assert response.status_code == 302
    assert Product.objects.get(id=acme.product.id).name == "Acme Cloud"


def test_staff_who_manage_no_product_open_none_of_these_pages(acme, django_user_model):
    from django.test import Client

    clerk = django_user_model.objects.create_user("clerk", password="pw-clerk-123", is_staff=True)
    client = Client()
    client.force_login(clerk)

    for path in README_ADMIN_PAGES[1:]:
        assert client.get(path).status_code == 403
