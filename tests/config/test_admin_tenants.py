"""Staff manage tenants in the admin: products, ingestion keys (rotation) and API tokens."""

import re

import pytest

from engagement.models import Product
from ingestion.models import IngestionKey
from readapi.models import ApiToken, hash_token


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
