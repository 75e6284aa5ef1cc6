"""Score rows keep their figures when the tables move from a surrogate id to (subject, workspace)
keys, and again on the way back (migration engagement.0026)."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.both_databases

BEFORE = [("engagement", "0025_rollups_ordered_through")]
AFTER = [("engagement", "0026_score_composite_keys")]


def migrated_to(target):
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    return MigrationExecutor(connection).loader.project_state(target).apps


def scores(apps):
    """Every user and account score row as (subject id, workspace id, score, and the breakdown
    for users, the active users for accounts)."""
    users = apps.get_model("engagement", "UserScore").objects.values_list(
        "user_id", "workspace_id", "engagement_score", "score_breakdown"
    )
    accounts = apps.get_model("engagement", "AccountScore").objects.values_list(
        "account_id", "workspace_id", "engagement_score", "active_users"
    )
    return sorted(users), sorted(accounts)


@pytest.mark.django_db(transaction=True)
def test_score_rows_survive_the_move_to_composite_keys_and_back():
    old = migrated_to(BEFORE)
    product = old.get_model("engagement", "Product").objects.create(name="Acme")
    workspace = old.get_model("engagement", "Workspace").objects.create(
        product=product, name="Default"
    )
    user_model = old.get_model("engagement", "User")
    ada = user_model.objects.create(product=product, tracking_id="ada")
    bob = user_model.objects.create(product=product, tracking_id="bob")
    globex = old.get_model("engagement", "Account").objects.create(
        product=product, tracking_id="globex"
    )
    user_score = old.get_model("engagement", "UserScore")
    user_score.objects.create(workspace=workspace, user=ada, engagement_score=71)
    user_score.objects.create(workspace=workspace, user=bob, engagement_score=12)
    old.get_model("engagement", "AccountScore").objects.create(
        workspace=workspace, account=globex, engagement_score=42, active_users=2
    )
    before = scores(old)

    new = migrated_to(AFTER)

    assert scores(new) == before
    keyed = new.get_model("engagement", "UserScore")
    assert keyed.objects.get(pk=(ada.id, workspace.id)).engagement_score == 71
    # The key still refuses a second row for the same user in the same workspace.
    with pytest.raises(IntegrityError), transaction.atomic():
        keyed.objects.create(workspace_id=workspace.id, user_id=ada.id, engagement_score=5)

    back = migrated_to(BEFORE)

    assert scores(back) == before
    ids = back.get_model("engagement", "UserScore").objects.values_list("id", flat=True)
    assert len(set(ids)) == 2 and None not in ids
    with pytest.raises(IntegrityError), transaction.atomic():
        back.get_model("engagement", "UserScore").objects.create(
            workspace_id=workspace.id, user_id=bob.id, engagement_score=5
        )
    migrated_to(MigrationExecutor(connection).loader.graph.leaf_nodes())
