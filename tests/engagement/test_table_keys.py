"""The busiest tables' keys on PostgreSQL (migrations 0023 and 0024): score rows and rollups keyed
by what identifies them, raw events by nothing, while Django keeps `id` as each model's primary
key and the ORM still creates, changes and deletes those rows."""

import pytest
from django.db import IntegrityError, connection, transaction

from engagement.models import Event, EventRollup, UserScore
from engagement.services import Message, messages_apply
from tests.factories import UserFactory

pytestmark = pytest.mark.postgresql


def indexes(table: str) -> dict[str, tuple[bool, list[str]]]:
    """Every index of the table: name -> (whether it is the primary key, its columns)."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return {
        name: (bool(details["primary_key"]), details["columns"])
        for name, details in found.items()
        if details["index"] or details["primary_key"] or details["unique"]
    }


def test_score_rows_are_keyed_by_subject_and_workspace_with_no_index_on_id(db):
    assert indexes("engagement_userscore") == {
        "user_score_unique": (True, ["user_id", "workspace_id"]),
        "user_score_rank_idx": (False, ["workspace_id", "engagement_score", "user_id"]),
    }
    assert indexes("engagement_accountscore") == {
        "account_score_unique": (True, ["account_id", "workspace_id"]),
        "account_score_rank_idx": (False, ["workspace_id", "engagement_score", "account_id"]),
    }


def test_rollups_are_keyed_by_their_day_and_raw_events_by_nothing(db):
    assert indexes("engagement_eventrollup") == {
        "rollup_unique_day": (
            True,
            ["product_id", "user_id", "event_name", "day", "account_key"],
        ),
        "rollup_account_day_idx": (False, ["account_id", "day"]),
    }
    assert indexes("engagement_event") == {}
    assert indexes("engagement_event_default") == {}


def test_the_orm_still_writes_score_rows_by_their_id(acme):
    ada = UserFactory(product=acme.product, tracking_id="ada")
    score = UserScore.objects.create(workspace=acme.workspace, user=ada, engagement_score=40)
    assert score.pk is not None

    score.engagement_score = 55
    score.save()
    assert UserScore.objects.get(workspace=acme.workspace, user=ada).engagement_score == 55

    with pytest.raises(IntegrityError), transaction.atomic():
        UserScore.objects.create(workspace=acme.workspace, user=ada)

    ada.delete()
    assert not UserScore.objects.filter(workspace=acme.workspace).exists()


def test_applied_events_get_distinct_ids_and_add_to_one_rollup_per_day(acme):
    for _ in range(2):
        messages_apply(
            product_id=acme.product.id,
            messages=[
                Message(
                    message_type="track",
                    timestamp_ms=1_764_158_400_000,  # 2025-11-26 12:00 UTC
                    user_id="ada",
                    event="Report_Created",
                )
            ],
        )

    ids = list(Event.objects.values_list("id", flat=True))
    assert len(ids) == len(set(ids)) == 2
    assert list(EventRollup.objects.values_list("count", flat=True)) == [2]
