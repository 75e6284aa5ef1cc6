"""DATABASE_REPLICA_URL: the read API reads from the replica; tokens and everything else use the
primary. The replica here is a second connection to the test database (what matters is which
connection each query goes through)."""

import copy

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from config.db_routers import REPLICA_ALIAS, ReadApiReplicaRouter, replica_reads
from engagement.models import User
from readapi.models import ApiToken
from readapi.services import api_token_revoke

# Added while the tests are collected, before the test database is set up, which then points it
# at the test database as a mirror of the primary (as settings.py does with TEST.MIRROR).
if connections.settings["default"]["ENGINE"] == "django.db.backends.postgresql":
    connections.settings.setdefault(
        REPLICA_ALIAS,
        {**copy.deepcopy(connections.settings["default"]), "TEST": {"MIRROR": "default"}},
    )

pytestmark = [
    pytest.mark.postgresql,
    pytest.mark.django_db(transaction=True, databases=["default", REPLICA_ALIAS]),
]


@pytest.fixture
def replica_configured(settings):
    settings.DATABASE_ROUTERS = ["config.db_routers.ReadApiReplicaRouter"]


def test_read_api_reads_the_replica_and_checks_the_token_on_the_primary(
    acme, read, replica_configured
):
    with (
        CaptureQueriesContext(connections[REPLICA_ALIAS]) as on_replica,
        CaptureQueriesContext(connections["default"]) as on_primary,
    ):
        response = read(acme, "/v2/workspaces")

    assert response.status_code == 200
    assert [w["id"] for w in response.json()["data"]] == [acme.workspace.id]
    replica_sql = " ".join(query["sql"] for query in on_replica)
    primary_sql = " ".join(query["sql"] for query in on_primary)
    assert "engagement_workspace" in replica_sql
    assert "engagement_workspace" not in primary_sql
    assert "readapi_apitoken" in primary_sql  # the token check, and its last-use time
    assert "readapi_apitoken" not in replica_sql


def test_a_revoked_token_is_refused_at_once_whatever_the_replica_holds(
    acme, read, replica_configured
):
    assert read(acme, "/v2/workspaces").status_code == 200
    api_token_revoke(token_id=ApiToken.objects.get(product=acme.product).id)
    assert read(acme, "/v2/workspaces").status_code == 401


def test_only_reads_inside_the_read_api_go_to_the_replica():
    router = ReadApiReplicaRouter()
    assert router.db_for_read(User) is None  # the primary: workers, scoring, admin
    with replica_reads():
        assert router.db_for_read(User) == REPLICA_ALIAS
        assert router.db_for_write(User) == "default"
    assert router.db_for_read(User) is None
    assert router.allow_migrate("default", "engagement")
    assert not router.allow_migrate(REPLICA_ALIAS, "engagement")
