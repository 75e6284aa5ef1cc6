"""The compact score breakdown: stored as [[event, count, weight]], read as objects."""

import pytest
from django.db import connection

from engagement.models import UserScore
from tests.engagement.helpers import apply, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def stored_breakdown(score: UserScore) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT score_breakdown FROM engagement_userscore"
            " WHERE user_id = %s AND workspace_id = %s",
            [score.user_id, score.workspace_id],
        )
        return cursor.fetchone()[0]


def test_breakdown_is_stored_compact_and_read_with_points(acme):
    apply(acme, track("u1", "Login"))
    score = UserScore.objects.create(
        workspace=acme.workspace,
        user=acme.product.users.get(tracking_id="u1"),
        score_breakdown=[{"event": 'Report "Q3"', "count": 4, "weight": 3, "points": 12}],
    )
    assert stored_breakdown(score) == '[["Report \\"Q3\\"",4,3]]'
    score.refresh_from_db()
    assert score.score_breakdown == [
        {"event": 'Report "Q3"', "count": 4, "weight": 3, "points": 12}
    ]


def test_breakdown_written_as_objects_still_reads(acme):
    apply(acme, track("u1", "Login"))
    score = UserScore.objects.create(
        workspace=acme.workspace, user=acme.product.users.get(tracking_id="u1")
    )
    assert stored_breakdown(score) == "[]"
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE engagement_userscore SET score_breakdown = %s"
            " WHERE user_id = %s AND workspace_id = %s",
            [
                '[{"event": "Login", "count": 2, "weight": 5, "points": 10}]',
                score.user_id,
                score.workspace_id,
            ],
        )
    score.refresh_from_db()
    assert score.score_breakdown == [{"event": "Login", "count": 2, "weight": 5, "points": 10}]
