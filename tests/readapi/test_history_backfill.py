"""Past events sent late reach the score history read through the API after the score refresh's
next tick, not an hour later: the real door, drain, beat task and read API, in process."""

from datetime import UTC, datetime, timedelta

import pytest

from engagement.models import Account, ScoreHistoryBackfill, ScoreHistoryState
from engagement.tasks import score_history_due, scores_refresh_due
from tests.engagement.helpers import apply, group, track
from tests.engagement.test_scoring import configure
from tests.ingestion.segment_support import iso_now, segment_auth

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def iso_days_ago(days: int) -> str:
    """Noon UTC `days` days ago."""
    noon = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    return (noon - timedelta(days=days)).isoformat()


@pytest.fixture
def acme_built(acme, eager_tasks):
    """Lookback 7. Ann and Bob in account Acme Corp; Bob reports once a day from ten days ago to
    today, Ann has sent nothing yet. Scored, and the history built by the beat."""
    configure(acme, lookback=7)
    apply(
        acme,
        group("ann", "acme-corp"),
        group("bob", "acme-corp"),
        *(track("bob", "report", days_ago=k, account="acme-corp") for k in range(11)),
    )
    scores_refresh_due()
    score_history_due()
    assert ScoreHistoryState.objects.get(workspace=acme.workspace).built_through is not None
    assert not ScoreHistoryBackfill.objects.exists()
    return Account.objects.get(product=acme.product, tracking_id="acme-corp")


def account_history(read, tenant, account, days=16):
    response = read(
        tenant, f"/v2/accounts/{account.id}/history", workspace_id=tenant.workspace.id, days=days
    )
    assert response.status_code == 200
    return response.json()["data"]


def test_a_backdated_batch_shows_in_the_accounts_history_after_the_refresh_tick(
    acme, acme_built, read, post_json, drain
):
    before = account_history(read, acme, acme_built)
    # Bob alone: 100 each day he is in a window, the account the mean of Bob and Ann (0).
    assert [p["engagement_score"] for p in before] == [0] * 5 + [50] * 11

    # Ann's last two weeks, imported today through /v1/batch: one report a day, 14 to 1 days ago.
    body = {
        "batch": [
            {
                "type": "track",
                "userId": "ann",
                "event": "report",
                "timestamp": iso_days_ago(k),
                "context": {"groupId": "acme-corp"},
            }
            for k in range(14, 0, -1)
        ],
        "sentAt": iso_now(),
    }
    response = post_json("/v1/batch", body, auth=segment_auth(acme.key.key))
    assert response.status_code == 200
    assert drain() == 1
    scores_refresh_due()  # the beat's next tick (every SCORING_REFRESH_SECONDS)

    after = account_history(read, acme, acme_built)
    # Day k ago: Ann's raw is her days in its 7-day window (1 at k=14 up to 7 from k=8 on), Bob's
    # min(7, 11 - k) from k=10 on. Alone (k=14..11) Ann is the p90 and scores 100: mean 50. With
    # both, p90 = a + 0.9 (b - a): k=10 Ann 5, Bob 1, p90 4.6, Bob 22, mean 61; k=9 p90 5.6, Bob
    # 36, mean 68; k=8 p90 6.6, Bob 45, 72.5 -> 73; k=7 p90 6.7, Bob 60, 80; k=6 p90 6.8, Bob 74,
    # 87; k=5 p90 6.9, Bob 87, 93.5 -> 94; k=4..1 both 7, both 100.
    assert [p["engagement_score"] for p in after[:-1]] == [
        0, 50, 50, 50, 50, 61, 68, 73, 80, 87, 94, 100, 100, 100, 100,
    ]  # fmt: skip
    # The account's own events: Ann's in the window, and Bob's.
    assert [p["raw_score"] for p in after[:-1]] == [
        0, 1, 2, 3, 4, 6, 8, 10, 11, 12, 13, 14, 14, 14, 14,
    ]  # fmt: skip
    record = read(acme, f"/v2/accounts/{acme_built.id}", workspace_id=acme.workspace.id).json()
    assert after[-1]["engagement_score"] == record["engagement_score"]
    assert not ScoreHistoryBackfill.objects.exists()  # the noted day is done with
