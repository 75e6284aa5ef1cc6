"""`manage.py create_product "Name" --json`: a tenant ready to send and read data."""

import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command

from engagement.models import Event, Product, Workspace
from ingestion.models import IngestionKey
from readapi.models import ApiToken, hash_token

pytestmark = pytest.mark.both_databases


def test_create_product_prints_ids_a_working_key_and_a_token_shown_once(db, client, drain):
    out = StringIO()
    call_command("create_product", "Initech", "--json", stdout=out)

    created = json.loads(out.getvalue())
    assert set(created) == {"product_id", "workspace_id", "ingestion_key", "api_token"}
    product = Product.objects.get(id=created["product_id"])
    assert product.name == "Initech"
    assert Workspace.objects.get(id=created["workspace_id"]).product == product
    assert IngestionKey.objects.get(key=created["ingestion_key"]).product == product
    token = created["api_token"]
    assert token.startswith("eds_") and len(token) >= 4 + 32
    stored = ApiToken.objects.get(product=product)
    assert stored.token_hash == hash_token(token)
    assert token not in str(ApiToken.objects.values().get())

    response = client.post(
        "/v2/track",
        {"userId": "u1", "event": "Report_Created"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Basic {created['ingestion_key']}",
    )
    assert response.status_code == 202
    drain()
    assert Event.objects.filter(product=product).count() == 1


def test_keys_are_long_and_random(db):
    call_command("create_product", "A", "--json", stdout=StringIO())
    call_command("create_product", "B", "--json", stdout=StringIO())

    keys = list(IngestionKey.objects.values_list("key", flat=True))
    assert len(set(keys)) == 2
    assert all(len(key) >= 32 for key in keys)


def test_the_json_output_is_only_json_when_run_as_a_command(tmp_path):
    # A process of its own, on the embedded database: nothing that starts with Django (a
    # library's banner, a warning) may reach standard output before the JSON.
    env = {**os.environ, "DATABASE_URL": "", "CELERY_BROKER_URL": "", "DATA_DIR": str(tmp_path)}
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput"], env=env, check=True, capture_output=True)

    done = subprocess.run(
        [*manage, "create_product", "Initech", "--json"], env=env, capture_output=True, text=True
    )

    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) == {
        "product_id",
        "workspace_id",
        "ingestion_key",
        "api_token",
    }
