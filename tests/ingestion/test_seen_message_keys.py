"""SeenMessage rows are keyed by md5("<product id>:<messageId>"): the same key in SQL and in
Python, and the ids already seen before the rekeying migration stay seen."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from ingestion.models import SeenMessage, seen_message_key
from ingestion.services.dedup import seen_messages_claim
from tests.ingestion.segment_support import iso_now, segment_auth, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def test_the_drain_and_python_agree_on_the_key(acme, post_json, drain):
    post_json(
        "/v1/batch",
        {"batch": [track("usr_ann", "E", messageId="m-ü-1")], "sentAt": iso_now()},
        auth=segment_auth(acme.key.key),
    )
    drain()

    seen = SeenMessage.objects.get()
    assert (seen.message_id, seen.product_id) == ("m-ü-1", acme.product.id)
    assert seen.message_key == seen_message_key(acme.product.id, "m-ü-1")
    # The same id is taken for this product only.
    assert seen_messages_claim(product_id=acme.product.id, message_ids=["m-ü-1", "m-2"]) == {"m-2"}


@pytest.mark.django_db(transaction=True)
def test_ids_seen_before_the_rekeying_stay_seen():
    before, after = (
        [("ingestion", "0002_segment_dedup")],
        [("ingestion", "0003_lean_seen_messages")],
    )
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    product = old_apps.get_model("engagement", "Product").objects.create(name="Acme")
    old_apps.get_model("ingestion", "SeenMessage").objects.create(
        product_id=product.id, message_id="m-1", seen_at=timezone.now()
    )

    executor = MigrationExecutor(connection)
    executor.migrate(after)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    seen = SeenMessage.objects.get()
    assert (seen.message_key, seen.message_id) == (seen_message_key(product.id, "m-1"), "m-1")
    assert seen_messages_claim(product_id=product.id, message_ids=["m-1"]) == set()
