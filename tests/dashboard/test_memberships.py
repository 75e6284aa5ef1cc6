"""Who sees and manages which product: per-product membership, superusers see everything."""

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError

from engagement.memberships import can_manage_product, product_role, products_visible_to
from engagement.models import ProductMembership


@pytest.fixture
def people(db):
    users = get_user_model().objects
    return {
        "root": users.create_superuser("root", "root@example.com", "pw"),
        "vera": users.create_user("vera", "vera@example.com", "pw"),
        "max": users.create_user("max", "max@example.com", "pw"),
        "nobody": users.create_user("nobody", "nobody@example.com", "pw"),
    }


def test_members_see_their_products_and_superusers_see_all(people, acme, globex):
    ProductMembership.objects.create(user=people["vera"], product=acme.product)
    ProductMembership.objects.create(
        user=people["max"], product=globex.product, role=ProductMembership.Role.MANAGER
    )

    assert list(products_visible_to(people["vera"])) == [acme.product]
    assert list(products_visible_to(people["max"])) == [globex.product]
    assert list(products_visible_to(people["nobody"])) == []
    assert list(products_visible_to(people["root"])) == [acme.product, globex.product]


def test_only_managers_and_superusers_manage(people, acme, globex):
    ProductMembership.objects.create(user=people["vera"], product=acme.product)
    ProductMembership.objects.create(
        user=people["max"], product=acme.product, role=ProductMembership.Role.MANAGER
    )

    assert not can_manage_product(people["vera"], acme.product)
    assert can_manage_product(people["max"], acme.product)
    assert can_manage_product(people["max"], acme.product.id)
    assert not can_manage_product(people["max"], globex.product)
    assert can_manage_product(people["root"], globex.product)
    assert product_role(people["vera"], acme.product.id) == "viewer"
    assert product_role(people["vera"], globex.product.id) is None


def test_an_inactive_member_sees_and_manages_nothing(people, acme):
    ProductMembership.objects.create(
        user=people["max"], product=acme.product, role=ProductMembership.Role.MANAGER
    )
    people["max"].is_active = False
    people["max"].save()

    assert list(products_visible_to(people["max"])) == []
    assert not can_manage_product(people["max"], acme.product)


def test_one_membership_per_user_and_product(people, acme):
    ProductMembership.objects.create(user=people["vera"], product=acme.product)
    with pytest.raises(IntegrityError):
        ProductMembership.objects.create(
            user=people["vera"], product=acme.product, role=ProductMembership.Role.MANAGER
        )
