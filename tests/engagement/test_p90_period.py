"""p90 in a large workspace (engagement/scoring/ranks.py p90_due): an incremental refresh takes it
over every score row at most every SCORING_P90_SECONDS. Between, every score is computed against
the p90 kept, so scores stay consistent with each other; after the period the next refresh (the
sweep queues one even with nothing new) takes it again and the scores are those of a full
rescore. How far a score may lag meanwhile: its value against the kept p90 instead of the exact
one."""

from datetime import timedelta

import pytest

from engagement.models import Account, AccountScore, ScoringState, UserScore
from engagement.scoring import score_from_raw, workspace_refresh, workspaces_to_sweep
from tests.engagement.helpers import apply, group, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


@pytest.fixture
def large(settings):
    """Every workspace counts as large: p90 is taken at most once a minute."""
    settings.SCORING_P90_EXACT_USERS = 1
    settings.SCORING_P90_SECONDS = 60
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0


def scores(tenant) -> dict[str, tuple[float, int]]:
    rows = UserScore.objects.filter(workspace=tenant.workspace)
    return {
        tracking_id: (raw, score)
        for tracking_id, raw, score in rows.values_list(
            "user__tracking_id", "raw_score", "engagement_score"
        )
    }


def state(tenant) -> ScoringState:
    return ScoringState.objects.get(workspace=tenant.workspace)


def test_between_takes_scores_follow_the_kept_p90_then_the_exact_one(acme, large):
    apply(acme, *(track(f"u{n}", "Login", times=n) for n in range(1, 11)))
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "full"
    kept = state(acme).p90
    assert scores(acme)["u5"] == (5, score_from_raw(raw=5, p90=kept))

    # A heavy newcomer moves the exact p90 up; within the minute the kept one stays.
    apply(acme, track("newcomer", "Login", times=40), track("u5", "Login", times=3))
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "incremental"
    assert state(acme).p90 == kept
    lagging = scores(acme)
    assert lagging["u5"] == (8, score_from_raw(raw=8, p90=kept))  # a changed user: kept p90
    assert lagging["u3"] == (3, score_from_raw(raw=3, p90=kept))  # an unchanged one: as before

    # A minute on, with nothing new, the sweep finds the lag and the refresh takes p90 again.
    ScoringState.objects.filter(workspace=acme.workspace).update(
        p90_at=state(acme).p90_at - timedelta(seconds=61),
        refreshed_at=state(acme).refreshed_at - timedelta(seconds=1),
    )
    assert workspaces_to_sweep() == [acme.workspace.id]
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "incremental"
    exact = state(acme).p90
    assert exact > kept
    caught_up = scores(acme)
    assert workspace_refresh(workspace_id=acme.workspace.id, force_full=True).mode == "full"
    assert state(acme).p90 == exact
    assert caught_up == scores(acme)  # what a full rescore gives
    assert caught_up["u3"] == (3, score_from_raw(raw=3, p90=exact)) != lagging["u3"]
    assert workspaces_to_sweep() == []


def test_a_small_workspace_takes_p90_on_every_refresh(acme, settings):
    settings.SCORING_P90_EXACT_USERS = 100_000
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    apply(acme, *(track(f"u{n}", "Login", times=n) for n in range(1, 11)))
    workspace_refresh(workspace_id=acme.workspace.id)
    kept = state(acme).p90

    apply(acme, track("newcomer", "Login", times=40))
    workspace_refresh(workspace_id=acme.workspace.id)

    assert state(acme).p90 > kept
    assert scores(acme)["u3"] == (3, score_from_raw(raw=3, p90=state(acme).p90))


def account_rows(tenant) -> dict[str, dict]:
    rows = AccountScore.objects.filter(workspace=tenant.workspace).values()
    accounts = dict(Account.objects.values_list("id", "tracking_id"))
    return {
        accounts[row["account_id"]]: {
            k: v for k, v in row.items() if k not in ("computed_at", "id")
        }
        for row in rows
    }


def test_accounts_of_re_normalised_users_take_their_users_new_mean(acme, settings):
    """A p90 move rescores users whose own events did not change; their accounts' scores (the
    users' mean) follow, from the members alone, and equal what a full rescore writes."""
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0  # a small workspace: p90 on every refresh
    apply(
        acme,
        *(group(f"u{n}", f"team{n % 3}") for n in range(1, 13)),
        *(track(f"u{n}", "Login", times=n, account=f"team{n % 3}") for n in range(1, 13)),
    )
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "full"
    before = account_rows(acme)

    # A heavy newcomer in an account of its own moves p90 up: every other user scores lower.
    apply(acme, group("newcomer", "newco"), track("newcomer", "Login", times=60, account="newco"))
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "incremental"
    after = account_rows(acme)
    for team in ("team0", "team1", "team2"):
        assert after[team]["raw_score"] == before[team]["raw_score"]
        assert after[team]["events_in_window"] == before[team]["events_in_window"]
        assert after[team]["engagement_score"] < before[team]["engagement_score"]

    assert workspace_refresh(workspace_id=acme.workspace.id, force_full=True).mode == "full"
    assert account_rows(acme) == after
