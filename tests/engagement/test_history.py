"""Score history on hand-computed examples, and each stored day against a rescore as of it."""

import random
from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import transaction

from config.celery import app
from engagement.history import (
    HISTORY_MAX_DAYS,
    account_score_history,
    score_history_backfill_is_due,
    score_history_is_due,
    score_history_update,
    user_score_history,
)
from engagement.history_build import HistoryBuilder
from engagement.models import (
    Account,
    AccountScore,
    AccountScoreDay,
    EventRollup,
    EventWeight,
    ScoreHistoryBackfill,
    ScoreHistoryState,
    User,
    UserScore,
    UserScoreDay,
)
from engagement.scoring import percentile_90, workspace_rescore
from engagement.tasks import score_history_due
from tests.engagement.helpers import apply, group, track
from tests.engagement.test_scoring import configure

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def today() -> date:
    return datetime.now(UTC).date()


def day(days_ago: int) -> date:
    return today() - timedelta(days=days_ago)


def end_of(day_: date) -> datetime:
    return datetime(day_.year, day_.month, day_.day, 23, 59, tzinfo=UTC)


def user_id(tenant, tracking_id: str) -> int:
    return User.objects.get(product=tenant.product, tracking_id=tracking_id).id


def account_id(tenant, tracking_id: str) -> int:
    return Account.objects.get(product=tenant.product, tracking_id=tracking_id).id


def scores(points) -> list[int]:
    return [point.engagement_score for point in points]


def stored_points(workspace) -> tuple[dict, dict]:
    """The stored history, {(user or account id, day): (score, raw)}, users then accounts."""
    users = {
        (row.user_id, row.day): (row.engagement_score, row.raw_score)
        for row in UserScoreDay.objects.filter(workspace=workspace)
    }
    accounts = {
        (row.account_id, row.day): (row.engagement_score, row.raw_score)
        for row in AccountScoreDay.objects.filter(workspace=workspace)
    }
    return users, accounts


def rescored_points(workspace, *, days: int) -> tuple[dict, dict]:
    """What a full rescore at the end of each of the last `days` past days scored, in the form
    of stored_points (subjects scoring 0 left out, as the history leaves them out)."""
    users, accounts = {}, {}
    for k in range(days, 0, -1):
        workspace_rescore(workspace_id=workspace.id, now=end_of(day(k)))
        for row in UserScore.objects.filter(workspace=workspace):
            if row.engagement_score or row.raw_score:
                users[(row.user_id, day(k))] = (row.engagement_score, row.raw_score)
        for row in AccountScore.objects.filter(workspace=workspace):
            if row.engagement_score or row.raw_score:
                accounts[(row.account_id, day(k))] = (row.engagement_score, row.raw_score)
    return users, accounts


def assert_built_history_is_rescored(
    workspace, *, days: int, more_users_than: int, more_accounts_than: int
) -> tuple[dict, dict]:
    """Build the history, check it point by point against rescored_points (over enough points
    to mean something) and return those points."""
    score_history_update(workspace_id=workspace.id)
    stored_users, stored_accounts = stored_points(workspace)
    expected_users, expected_accounts = rescored_points(workspace, days=days)
    assert len(expected_users) > more_users_than
    assert len(expected_accounts) > more_accounts_than
    assert stored_users == expected_users
    assert stored_accounts == expected_accounts
    return expected_users, expected_accounts


@pytest.fixture
def ada_and_bob(acme):
    """Lookback 7. Ada reports 4 times ten days ago, then nothing; Bob reports once a day from
    ten days ago to today. Both belong to account Acme Corp; the events are its events."""
    configure(acme, lookback=7)
    apply(
        acme,
        group("ada", "acme-corp"),
        group("bob", "acme-corp"),
        track("ada", "report", days_ago=10, times=4, account="acme-corp"),
        *(track("bob", "report", days_ago=k, account="acme-corp") for k in range(11)),
    )
    # The data arrived an hour ago: a history built now has seen it (no backfill since).
    EventRollup.objects.update(updated_at=datetime.now(UTC) - timedelta(hours=1))
    workspace_rescore(workspace_id=acme.workspace.id)
    return acme


def test_a_user_active_only_in_the_first_days_decays_to_zero(ada_and_bob):
    acme = ada_and_bob
    result = score_history_update(workspace_id=acme.workspace.id)
    assert result.mode == "rebuilt"

    ada = user_score_history(workspace_id=acme.workspace.id, user_id=user_id(acme, "ada"), days=12)
    bob = user_score_history(workspace_id=acme.workspace.id, user_id=user_id(acme, "bob"), days=12)

    assert [point.date for point in ada] == [day(k) for k in range(11, -1, -1)]
    # Day k days ago: Ada's raw is 4 while her events are in the 7-day window (k = 10..4), Bob's
    # is the number of his days in it, min(7, 11 - k). p90 of two raws a <= b is a + 0.9 (b - a):
    # k=10: 4 and 1, p90 3.7, Bob 100 x 1 / 3.7 = 27; k=9: p90 3.8, Bob 53; k=8: p90 3.9, Bob 77;
    # k=7: 4 and 4; k=6: 4 and 5, p90 4.9, Ada 82; k=5: p90 5.8, Ada 69; k=4: p90 6.7, Ada 60.
    assert scores(ada) == [0, 100, 100, 100, 100, 82, 69, 60, 0, 0, 0, 0]
    assert [point.raw_score for point in ada] == [0, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0]
    assert scores(bob) == [0, 27, 53, 77, 100, 100, 100, 100, 100, 100, 100, 100]
    assert [point.raw_score for point in bob] == [0, 1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 7]


def test_an_account_scores_the_mean_of_its_users_and_its_own_events(ada_and_bob):
    acme = ada_and_bob
    score_history_update(workspace_id=acme.workspace.id)

    corp = account_score_history(
        workspace_id=acme.workspace.id, account_id=account_id(acme, "acme-corp"), days=12
    )

    # (100 + 27) / 2 = 63.5 -> 64, (100 + 53) / 2 -> 77, (100 + 77) / 2 -> 89, 100,
    # (82 + 100) / 2 = 91, (69 + 100) / 2 -> 85, (60 + 100) / 2 = 80, then (0 + 100) / 2 = 50.
    assert scores(corp) == [0, 64, 77, 89, 100, 91, 85, 80, 50, 50, 50, 50]
    assert [point.raw_score for point in corp] == [0, 5, 6, 7, 8, 9, 10, 11, 7, 7, 7, 7]


def test_today_is_the_live_score(ada_and_bob):
    acme = ada_and_bob
    score_history_update(workspace_id=acme.workspace.id)
    # A new event today moves the live score; the history's last point follows it at once.
    apply(acme, track("ada", "report", account="acme-corp"))
    workspace_rescore(workspace_id=acme.workspace.id)

    ada = user_score_history(workspace_id=acme.workspace.id, user_id=user_id(acme, "ada"))
    corp = account_score_history(
        workspace_id=acme.workspace.id, account_id=account_id(acme, "acme-corp")
    )

    live_user = UserScore.objects.get(workspace=acme.workspace, user__tracking_id="ada")
    live_account = AccountScore.objects.get(workspace=acme.workspace)
    assert len(ada) == 30 and ada[-1].date == today()
    assert (ada[-1].engagement_score, ada[-1].raw_score) == (
        live_user.engagement_score,
        live_user.raw_score,
    )
    # Raws 1 and 7: p90 1 + 0.9 x 6 = 6.4, and 100 x 1 / 6.4 = 15.6.
    assert (ada[-1].engagement_score, ada[-1].raw_score) == (16, 1)
    assert (corp[-1].engagement_score, corp[-1].raw_score) == (
        live_account.engagement_score,
        live_account.raw_score,
    )


def test_backfilled_past_events_show_their_past_scores(ada_and_bob):
    acme = ada_and_bob
    score_history_update(workspace_id=acme.workspace.id)
    cy = "cy"
    assert not User.objects.filter(tracking_id=cy).exists()

    # An import of Cy's past: 7 reports three days ago, arriving today.
    apply(acme, track(cy, "report", days_ago=3, times=7))
    result = score_history_update(workspace_id=acme.workspace.id)

    assert result.mode == "updated" and result.first_day == day(3)
    history = user_score_history(workspace_id=acme.workspace.id, user_id=user_id(acme, cy), days=5)
    # k=4: before Cy's first event, no point. k=3..1: Cy 7 and Bob 7 (Ada is out of the
    # window): both at p90, both 100.
    assert scores(history)[:4] == [None, 100, 100, 100]
    assert [point.raw_score for point in history][:4] == [None, 7, 7, 7]


def test_past_events_note_their_first_day_and_todays_note_none(ada_and_bob):
    acme = ada_and_bob
    score_history_update(workspace_id=acme.workspace.id)
    assert not score_history_backfill_is_due(workspace_id=acme.workspace.id)

    apply(acme, track("ada", "report", account="acme-corp"))
    assert not score_history_backfill_is_due(workspace_id=acme.workspace.id)
    apply(acme, track("ada", "report", days_ago=2), track("ada", "report", days_ago=5))

    assert score_history_backfill_is_due(workspace_id=acme.workspace.id)
    assert score_history_is_due(workspace=acme.workspace)
    note = ScoreHistoryBackfill.objects.get()
    assert (note.workspace_id, note.from_day) == (acme.workspace.id, day(5))


def test_a_late_event_recomputes_every_point_from_its_day_on_and_none_before(ada_and_bob):
    acme = ada_and_bob
    score_history_update(workspace_id=acme.workspace.id)
    bob = user_id(acme, "bob")
    # Marks no recompute could leave: a wrong point before the late event's day, one after it.
    UserScoreDay.objects.filter(user_id=bob, day=day(4)).update(engagement_score=1)
    UserScoreDay.objects.filter(user_id=bob, day=day(2)).update(engagement_score=1)

    # Ada's late report of three days ago (Bob sent nothing late).
    apply(acme, track("ada", "report", days_ago=3, account="acme-corp"))
    result = score_history_update(workspace_id=acme.workspace.id)

    assert (result.mode, result.first_day, result.last_day) == ("updated", day(3), day(1))
    assert UserScoreDay.objects.get(user_id=bob, day=day(4)).engagement_score == 1
    # From day 3 on Ada's raw is 1, Bob's 7: p90 6.4, Bob still 100 (his wrong mark rewritten).
    assert UserScoreDay.objects.get(user_id=bob, day=day(2)).engagement_score == 100
    ada = user_score_history(workspace_id=acme.workspace.id, user_id=user_id(acme, "ada"), days=5)
    assert scores(ada)[:4] == [60, 16, 16, 16]  # day 4 as it was; then 100 x 1 / 6.4 = 15.6
    # Written: Ada's three new points, Bob's corrected one, the account's three changed days.
    assert (result.user_points, result.account_points) == (4, 3)
    assert not score_history_backfill_is_due(workspace_id=acme.workspace.id)


def test_after_a_long_recompute_the_next_waits_as_long_again(ada_and_bob, settings):
    acme = ada_and_bob
    settings.SCORING_REFRESH_SECONDS = 10
    score_history_update(workspace_id=acme.workspace.id)
    apply(acme, track("ada", "report", days_ago=3, account="acme-corp"))
    assert score_history_backfill_is_due(workspace_id=acme.workspace.id)  # the last run was short

    # A recompute after late events that started at `started` and took 40 s (an import at a
    # million users, say).
    started = datetime.now(UTC)
    ScoreHistoryState.objects.filter(workspace=acme.workspace).update(
        checked_through=started, last_run_ms=40_000, last_backfill_ms=40_000
    )
    for seconds, due in ((0, False), (79, False), (80, True)):
        now = started + timedelta(seconds=seconds)
        assert score_history_backfill_is_due(workspace_id=acme.workspace.id, now=now) is due
    assert not score_history_is_due(workspace=acme.workspace, now=started)
    # A long run that was not such a recompute (the daily step, a rebuild) holds nothing back.
    ScoreHistoryState.objects.filter(workspace=acme.workspace).update(last_backfill_ms=0)
    assert score_history_backfill_is_due(workspace_id=acme.workspace.id, now=started)


def test_a_recompute_that_changes_nothing_writes_nothing(ada_and_bob):
    acme = ada_and_bob
    score_history_update(workspace_id=acme.workspace.id)
    stored = stored_points(acme.workspace)
    ScoreHistoryBackfill.objects.create(
        workspace=acme.workspace, from_day=day(9), noted_at=datetime.now(UTC)
    )

    result = score_history_update(workspace_id=acme.workspace.id)

    assert (result.mode, result.first_day) == ("updated", day(9))
    assert (result.user_points, result.account_points) == (0, 0)
    assert stored_points(acme.workspace) == stored


def test_late_events_noted_while_a_run_computes_wait_for_the_next_run(ada_and_bob, monkeypatch):
    acme = ada_and_bob
    score_history_update(workspace_id=acme.workspace.id)
    apply(acme, track("ada", "report", days_ago=3, account="acme-corp"))
    build = HistoryBuilder.build

    def build_while_more_arrive(builder):
        # Committed after the run read its noted days (a concurrent apply, in effect).
        apply(acme, track("bob", "report", days_ago=6, times=2, account="acme-corp"))
        return build(builder)

    monkeypatch.setattr(HistoryBuilder, "build", build_while_more_arrive)
    assert score_history_update(workspace_id=acme.workspace.id).first_day == day(3)
    monkeypatch.setattr(HistoryBuilder, "build", build)

    assert score_history_backfill_is_due(workspace_id=acme.workspace.id)
    assert score_history_update(workspace_id=acme.workspace.id).first_day == day(6)
    assert not score_history_backfill_is_due(workspace_id=acme.workspace.id)
    backfill_ms = ScoreHistoryState.objects.get(workspace=acme.workspace).last_backfill_ms
    assert backfill_ms > 0
    # A run queued meanwhile finds nothing left to do, and leaves the last run's figures.
    assert score_history_update(workspace_id=acme.workspace.id).mode == "idle"
    assert ScoreHistoryState.objects.get(workspace=acme.workspace).last_backfill_ms == backfill_ms
    bob = UserScoreDay.objects.get(user_id=user_id(acme, "bob"), day=day(6))
    assert bob.raw_score == 7  # 5 days of one report, and two more six days ago


def test_the_daily_step_adds_the_day_that_ended(ada_and_bob):
    acme = ada_and_bob
    score_history_update(workspace_id=acme.workspace.id)
    tomorrow = end_of(today()) + timedelta(minutes=2)
    assert not score_history_is_due(workspace=acme.workspace)
    assert score_history_is_due(workspace=acme.workspace, now=tomorrow)

    result = score_history_update(workspace_id=acme.workspace.id, now=tomorrow)

    assert (result.mode, result.first_day, result.last_day) == ("updated", today(), today())
    bob = UserScoreDay.objects.get(user_id=user_id(acme, "bob"), day=today())
    assert (bob.engagement_score, bob.raw_score) == (100, 7)
    assert not score_history_is_due(workspace=acme.workspace, now=tomorrow)
    again = score_history_update(workspace_id=acme.workspace.id, now=tomorrow)
    assert again.mode == "idle"


def test_a_settings_change_recomputes_the_whole_history(ada_and_bob):
    acme = ada_and_bob
    score_history_update(workspace_id=acme.workspace.id)
    EventWeight.objects.create(workspace=acme.workspace, event_name="report", weight=0)

    assert score_history_is_due(workspace=acme.workspace)
    assert score_history_update(workspace_id=acme.workspace.id).mode == "rebuilt"
    assert not UserScoreDay.objects.filter(workspace=acme.workspace).exists()
    assert not AccountScoreDay.objects.filter(workspace=acme.workspace).exists()


def test_deleting_a_user_deletes_their_history(ada_and_bob):
    acme = ada_and_bob
    score_history_update(workspace_id=acme.workspace.id)
    assert UserScoreDay.objects.filter(user__tracking_id="ada").count() == 7

    User.objects.filter(tracking_id="ada").delete()

    assert not UserScoreDay.objects.filter(user__tracking_id="ada").exists()
    assert UserScoreDay.objects.filter(workspace=acme.workspace).count() == 10  # Bob's


def test_days_outside_one_to_the_maximum_are_refused(acme):
    for days in (0, HISTORY_MAX_DAYS + 1):
        with pytest.raises(ValueError):
            user_score_history(workspace_id=acme.workspace.id, user_id=1, days=days)


def test_history_is_per_workspace(ada_and_bob, globex):
    acme = ada_and_bob
    score_history_update(workspace_id=acme.workspace.id)
    score_history_update(workspace_id=globex.workspace.id)

    assert not UserScoreDay.objects.filter(workspace=globex.workspace).exists()
    ada = user_score_history(workspace_id=globex.workspace.id, user_id=user_id(acme, "ada"))
    assert scores(ada) == [0] * 30


def several_accounts_activity(acme, *, cap: int | None) -> None:
    """Weights (one excluded), a cap, an account filter, users in several accounts, events
    without an account, over 12 days with a lookback of 7."""
    configure(
        acme,
        lookback=7,
        cap=cap,
        weights={"report": 3, "viewed": 0},
        account_filter={"plan": "pro"},
    )
    apply(
        acme,
        group("u1", "a", {"plan": "pro"}),
        group("u2", "a"),
        group("u2", "b", {"plan": "pro"}),
        group("u3", "c", {"plan": "free"}),
        group("u4", "b"),
        group("u5", "b"),
        track("u1", "report", days_ago=12, times=3, account="a"),
        track("u1", "login", days_ago=6, times=5, account="a"),
        track("u2", "report", days_ago=9, times=1, account="b"),
        track("u2", "report", days_ago=9, times=2, account="a"),
        track("u2", "viewed", days_ago=4, times=9, account="b"),
        track("u3", "report", days_ago=5, times=4, account="c"),
        track("u4", "login", days_ago=2, times=4),
        track("u4", "report", days_ago=8, times=1, account="b"),
        track("u5", "login", days_ago=1, times=1, account="b"),
    )


@pytest.mark.parametrize("cap", [None, 2])
def test_every_stored_day_equals_a_rescore_as_of_that_day(acme, cap):
    """Weights, a cap, a filter, users in several accounts, events without an account: the
    history of each day is what scoring computed on that day."""
    several_accounts_activity(acme, cap=cap)
    workspace = acme.workspace
    expected = assert_built_history_is_rescored(
        workspace, days=14, more_users_than=20, more_accounts_than=10
    )
    assert_short_ranges_store_the_same(workspace, expected)


def assert_short_ranges_store_the_same(
    workspace, expected: tuple[dict, dict], *, own_transaction: bool = False
) -> None:
    """The path of up to a week (each subject's changes summed) stores the same points as the
    full build: for the daily step (days stored afresh), and for a recompute of stored days
    where some points are wrong, some missing and one is extra (only differences written).
    With own_transaction each build is its caller's outermost transaction (its accounts may
    then be computed on a second connection)."""
    for first_ago in (1, 2, 7):
        UserScoreDay.objects.filter(workspace=workspace, day__gte=day(first_ago)).delete()
        AccountScoreDay.objects.filter(workspace=workspace, day__gte=day(first_ago)).delete()
        build(workspace, first=day(first_ago), own_transaction=own_transaction)
        assert stored_points(workspace) == expected
    UserScoreDay.objects.filter(workspace=workspace, day=day(5)).update(engagement_score=1)
    AccountScoreDay.objects.filter(workspace=workspace, day=day(3)).delete()
    UserScoreDay.objects.filter(workspace=workspace, day=day(2)).delete()
    quiet = User.objects.create(product=workspace.product, tracking_id="quiet")
    UserScoreDay.objects.create(
        user=quiet, workspace=workspace, day=day(6), engagement_score=5, raw_score=1
    )
    build(workspace, first=day(6), stored_until=day(1), own_transaction=own_transaction)
    assert stored_points(workspace) == expected


def build(
    workspace, *, first: date, stored_until: date | None = None, own_transaction: bool = False
) -> None:
    with transaction.atomic():
        builder = HistoryBuilder(
            workspace=workspace,
            first=first,
            last=day(1),
            stored_until=stored_until,
            own_transaction=own_transaction,
        )
        try:
            builder.build()
        finally:
            builder.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_activity_stores_what_a_rescore_of_each_day_scores(acme, seed):
    """Activity drawn at random over 16 days with a lookback of 3: points leave the window on
    the day others enter it, days follow each other or leave gaps, several users share an
    account. Every stored day is still what scoring computed on that day."""
    configure(acme, lookback=3, weights={"report": 2})
    rng = random.Random(seed)
    members = [group(f"g{n}", f"acct-{n % 3}") for n in range(6)]
    # g0 acts exactly one lookback apart (an exit on the day of an entry), g1 on every day.
    tracked = [track("g0", "report", days_ago=k, account="acct-0") for k in (13, 10, 7, 4, 1)]
    tracked += [track("g1", "login", days_ago=k, account="acct-1") for k in range(1, 16)]
    for n in range(2, 6):
        for days_ago in rng.sample(range(1, 17), rng.randint(2, 8)):
            tracked.append(
                track(
                    f"g{n}",
                    rng.choice(["report", "login"]),
                    days_ago=days_ago,
                    times=rng.randint(1, 4),
                    account=rng.choice([f"acct-{n % 3}", None]),
                )
            )
    apply(acme, *members, *tracked)
    expected = assert_built_history_is_rescored(
        acme.workspace, days=17, more_users_than=40, more_accounts_than=15
    )
    assert_short_ranges_store_the_same(acme.workspace, expected)


def hierarchy_activity(acme, *, account_filter: dict | None) -> None:
    """Company > Workspace > Project (and a second project), a user in two of them, over 9
    days with a lookback of 5; with the filter only the company and one project qualify."""
    configure(acme, lookback=5, cap=3, weights={"report": 2}, account_filter=account_filter)
    pro = {"plan": "pro"}
    apply(
        acme,
        group("ceo", "company", pro),
        group("lead", "workspace", {"parent_group_id": "company"}),
        group("dev", "project", {"parent_group_id": "workspace", **pro}),
        group("qa", "project-2", {"parent_group_id": "workspace"}),
        group("lead", "project"),
        track("ceo", "login", days_ago=9, times=2, account="company"),
        track("lead", "report", days_ago=8, times=4, account="workspace"),
        track("lead", "report", days_ago=6, times=1, account="project"),
        track("dev", "report", days_ago=7, times=2, account="project"),
        track("dev", "login", days_ago=3, times=5, account="project"),
        track("qa", "login", days_ago=4, times=1, account="project-2"),
        track("qa", "report", days_ago=2, times=3),
    )


@pytest.mark.parametrize("account_filter", [None, {"plan": "pro"}])
def test_a_parents_history_covers_its_descendants(acme, account_filter):
    """Each day of a parent's history is what scoring computed on that day, its descendants'
    events and users included (a user in two of them counted once)."""
    hierarchy_activity(acme, account_filter=account_filter)
    expected = assert_built_history_is_rescored(
        acme.workspace, days=10, more_users_than=10, more_accounts_than=8
    )
    # Three days ago the company's own login had left the window: its descendants' remain.
    assert expected[1][(account_id(acme, "company"), day(3))][1] > 0
    assert_short_ranges_store_the_same(acme.workspace, expected)


def test_the_beat_updates_each_workspace_once_a_day(ada_and_bob, globex, settings):
    app.conf.task_always_eager = True
    try:
        assert "engagement.tasks.score_history_due" in {
            entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()
        }
        assert score_history_due() == 2  # never built: both
        assert score_history_due() == 0
    finally:
        app.conf.task_always_eager = False
    bob = user_score_history(
        workspace_id=ada_and_bob.workspace.id, user_id=user_id(ada_and_bob, "bob")
    )
    assert scores(bob)[-3:] == [100, 100, 100]


@pytest.mark.parametrize(
    "raws",
    [[7], [3, 9], [5, 5, 5, 8], list(range(1, 11)), list(range(1, 12)), [1, 1, 2, 3, 3, 3, 40, 40]],
)
def test_each_days_p90_is_the_scoring_percentile_of_its_raw_scores(acme, raws):
    """Read off a histogram on PostgreSQL, a day's p90 is still the scoring engine's percentile
    (interpolated between closest ranks), with ties and with odd and even counts."""
    builder = HistoryBuilder(workspace=acme.workspace, first=day(2), last=day(1))
    try:
        builder.temp("eds_h_user_day", "user_id BIGINT, day DATE, raw BIGINT")
        rows = [(n, day(1), raw) for n, raw in enumerate(raws)]
        rows += [(n, day(2), raw * 3) for n, raw in enumerate(raws[1:])]
        builder.cursor.executemany(
            "INSERT INTO eds_h_user_day (user_id, day, raw) VALUES (%s, %s, %s)", rows
        )
        builder.day_percentiles()
        builder.cursor.execute("SELECT day, p90 FROM eds_h_p90")
        p90s = {str(row_day): p90 for row_day, p90 in builder.cursor.fetchall()}
    finally:
        builder.close()
    expected = {str(day(1)): percentile_90(raws)}
    if raws[1:]:
        expected[str(day(2))] = percentile_90([raw * 3 for raw in raws[1:]])
    assert p90s == expected
