"""A staff user granted a product's marketplace connection keeps it as the product's manager."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [
    ("marketplace", "0002_sync_skips_and_heartbeat"),
    ("engagement", "0009_product_membership"),
]
AFTER = [("marketplace", "0003_grants_become_memberships")]


@pytest.mark.django_db(transaction=True)
def test_grants_become_manager_memberships():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    product_model = old.get_model("engagement", "Product")
    user_model = old.get_model("auth", "User")
    acme = product_model.objects.create(name="Acme")
    globex = product_model.objects.create(name="Globex")
    mia = user_model.objects.create(username="mia", is_staff=True)
    old.get_model("marketplace", "MarketplaceManager").objects.create(user=mia, product=acme)
    # Mia already reads Globex's dashboard and manages Acme's connection.
    old.get_model("engagement", "ProductMembership").objects.create(
        user=mia, product=globex, role="viewer"
    )

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    memberships = new.get_model("engagement", "ProductMembership").objects.filter(user_id=mia.id)

    assert sorted(memberships.values_list("product__name", "role")) == [
        ("Acme", "manager"),
        ("Globex", "viewer"),
    ]
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
