"""Scores on hand-computed examples: weights, windows, p90, caps, accounts, change, rank, filter."""

import json
import random
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from engagement.models import (
    AccountScore,
    EventWeight,
    Membership,
    ScoringState,
    UserScore,
)
from engagement.scoring import (
    percentile_90,
    scoring_window,
    workspace_refresh,
    workspace_refresh_is_due,
    workspace_rescore,
)
from tests.engagement.helpers import apply, group, identify, ranks, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases


def user_scores(tenant) -> dict[str, UserScore]:
    rows = UserScore.objects.filter(workspace=tenant.workspace).select_related("user")
    return {row.user.tracking_id: row for row in rows}


def account_scores(tenant) -> dict[str, AccountScore]:
    rows = AccountScore.objects.filter(workspace=tenant.workspace).select_related("account")
    return {row.account.tracking_id: row for row in rows}


def configure(tenant, *, lookback=7, cap=None, weights=None, account_filter=None):
    workspace = tenant.workspace
    workspace.lookback_days = lookback
    workspace.daily_event_cap = cap
    workspace.account_filter = account_filter or {}
    workspace.save()
    for name, weight in (weights or {}).items():
        EventWeight.objects.create(workspace=workspace, event_name=name, weight=weight)
    return workspace


@pytest.fixture
def five_users(acme):
    """Raw scores 7, 1, 12, 0, 3 with Report_Created=3, Viewed Page excluded, Login default 1."""
    configure(acme, weights={"Report_Created": 3, "Viewed Page": 0})
    apply(
        acme,
        group("u1", "A"),
        group("u2", "A"),
        group("u6", "A"),
        track("u1", "Report_Created", times=2),
        track("u1", "Login"),
        track("u2", "Login"),
        track("u3", "Report_Created", times=4),
        track("u4", "Viewed Page"),
        track("u5", "Login", times=3),
    )
    return acme


def test_p90_interpolates_between_closest_ranks():
    assert percentile_90([1, 3, 7, 12]) == pytest.approx(10.5)  # 7 + 0.7 * (12 - 7)
    assert percentile_90([5]) == 5
    assert percentile_90([]) == 0
    assert percentile_90(list(range(1, 11))) == pytest.approx(9.1)


def test_window_is_the_lookback_days_ending_today():
    window = scoring_window(lookback_days=7, today=datetime(2026, 3, 10).date())
    assert (str(window.start), str(window.end)) == ("2026-03-04", "2026-03-10")
    assert (str(window.previous_start), str(window.previous_end)) == ("2026-02-25", "2026-03-03")


def test_weighted_raw_scores_normalised_against_p90(five_users):
    workspace_rescore(workspace_id=five_users.workspace.id)
    scores = user_scores(five_users)
    # Non-zero raws 1, 3, 7, 12: p90 = 10.5.
    assert ScoringState.objects.get(workspace=five_users.workspace).p90 == pytest.approx(10.5)
    assert {k: s.raw_score for k, s in scores.items()} == {
        "u1": 7,
        "u2": 1,
        "u3": 12,
        "u4": 0,
        "u5": 3,
        "u6": 0,
    }
    # 100*7/10.5 = 66.7 -> 67; 100/10.5 = 9.5 -> 10; 12 >= p90 -> 100; 100*3/10.5 = 28.6 -> 29.
    assert {k: s.engagement_score for k, s in scores.items()} == {
        "u1": 67,
        "u2": 10,
        "u3": 100,
        "u4": 0,
        "u5": 29,
        "u6": 0,
    }


def test_exact_halves_round_up_in_the_database_too(acme):
    """Raws 1, 10, 20, 23, 46: p90 = 23 + 0.6 x (46 - 23) = 36.8, which both PostgreSQL's
    percentile_cont and the portable path compute as 36.800000000000004."""
    apply(
        acme,
        track("u1", "Login"),
        track("u2", "Login", times=10),
        track("u3", "Login", times=20),
        track("u4", "Login", times=23),
        track("u5", "Login", times=46),
    )
    workspace_rescore(workspace_id=acme.workspace.id)

    assert ScoringState.objects.get(workspace=acme.workspace).p90 == pytest.approx(36.8)
    # 100 x 23 / 36.8 = 62.5 -> 63; 100 / 36.8 = 2.72 -> 3; 1000 / 36.8 = 27.17 -> 27;
    # 2000 / 36.8 = 54.35 -> 54; 46 >= p90 -> 100.
    assert {k: s.engagement_score for k, s in user_scores(acme).items()} == {
        "u1": 3,
        "u2": 27,
        "u3": 54,
        "u4": 63,
        "u5": 100,
    }


def test_breakdown_metrics_and_adoption(five_users):
    workspace_rescore(workspace_id=five_users.workspace.id)
    u1, u4 = user_scores(five_users)["u1"], user_scores(five_users)["u4"]
    assert u1.score_breakdown == [
        {"event": "Report_Created", "count": 2, "weight": 3, "points": 6},
        {"event": "Login", "count": 1, "weight": 1, "points": 1},
    ]
    assert (u1.events_in_window, u1.active_days) == (3, 1)
    # Weighted names: Report_Created and Login (Viewed Page weighs 0).
    assert u1.adoption == 1.0
    assert user_scores(five_users)["u2"].adoption == 0.5
    # An excluded event is an event in the window but scores nothing and is not activity.
    assert (u4.events_in_window, u4.active_days, u4.score_breakdown) == (1, 0, [])
    assert u1.last_seen is not None


def test_percentile_rank_among_the_active(five_users):
    workspace_rescore(workspace_id=five_users.workspace.id)
    # Scores sorted: 0, 0, 10, 29, 67, 100. Ranked among the 4 scoring above 0: the share of
    # the other 3 scoring lower; a score of 0 has no rank.
    ranked = ranks(five_users, "user")
    assert ranked == {"u4": None, "u6": None, "u2": 0, "u5": 33.3, "u1": 66.7, "u3": 100}


def test_account_is_the_mean_of_all_its_users(five_users):
    workspace_rescore(workspace_id=five_users.workspace.id)
    account = account_scores(five_users)["A"]
    # u1 67, u2 10, u6 0 (linked, no events): mean 25.67 -> 26.
    assert account.engagement_score == 26
    assert (account.total_users, account.active_users) == (3, 2)
    assert account.active_user_share == pytest.approx(2 / 3)
    # Its own events: u1's 2 Report_Created and 1 Login, u2's Login (events went to A).
    assert account.raw_score == 8
    assert account.score_breakdown == [
        {"event": "Report_Created", "count": 2, "weight": 3, "points": 6},
        {"event": "Login", "count": 2, "weight": 1, "points": 2},
    ]


def test_events_outside_the_window_do_not_count(acme):
    configure(acme, lookback=7)
    apply(
        acme,
        track("u1", "Login", days_ago=6),  # oldest day of the window
        track("u1", "Login", days_ago=7),  # newest day of the previous window
        track("u2", "Login", days_ago=30),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    scores = user_scores(acme)
    assert (scores["u1"].raw_score, scores["u1"].previous_raw_score) == (1, 1)
    assert (scores["u2"].raw_score, scores["u2"].previous_raw_score) == (0, 0)
    assert scores["u2"].engagement_score == 0


def test_daily_cap_counts_at_most_n_of_one_event_per_user_per_day(acme):
    configure(acme, cap=2, weights={"Export": 5})
    apply(
        acme,
        track("bot", "Login", times=50),
        track("bot", "Login", days_ago=1, times=1),
        track("bot", "Export", times=3),
        track("human", "Login", times=2),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    bot = user_scores(acme)["bot"]
    # Login: 2 today (capped) + 1 yesterday; Export: 2 (capped) * 5.
    assert bot.raw_score == 3 + 10
    assert bot.events_in_window == 54  # what happened, uncapped
    assert {b["event"]: b["count"] for b in bot.score_breakdown} == {"Login": 3, "Export": 2}


def test_score_change_against_one_period_earlier(acme):
    configure(acme, lookback=1)
    apply(
        acme,
        track("u", "Login", days_ago=1, times=2),
        track("u", "Login"),
        track("v", "Login", days_ago=1),
        track("v", "Login"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    scores = user_scores(acme)
    # Now: raws 1, 1 -> both 100. Before: raws 2, 1 -> p90 1.9 -> u 100, v 100/1.9 = 52.6 -> 53.
    assert (scores["u"].engagement_score, scores["u"].previous_score) == (100, 100)
    assert (scores["v"].engagement_score, scores["v"].previous_score) == (100, 53)
    assert (scores["u"].score_change, scores["v"].score_change) == (0, 47)


def test_account_filter_restricts_accounts_and_their_users(acme):
    configure(acme, account_filter={"plan": "enterprise"})
    apply(
        acme,
        group("e1", "E", {"plan": "enterprise"}),
        group("f1", "F", {"plan": "free"}),
        track("e1", "Login"),
        track("f1", "Login"),
        track("loner", "Login"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    assert set(account_scores(acme)) == {"E"}
    assert set(user_scores(acme)) == {"e1"}
    # F upgrades: it and its user enter the workspace on the next refresh.
    apply(acme, group("f1", "F", {"plan": "enterprise"}, days_ago=0))
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "incremental"
    assert set(account_scores(acme)) == {"E", "F"}
    assert set(user_scores(acme)) == {"e1", "f1"}


@pytest.mark.parametrize("name", ["0", "2147483648", "a__b"])
def test_an_account_filter_names_its_trait_literally(acme, name):
    # A digit name was read as an array index (2147483648 crashed the refresh), `__` as a path.
    configure(acme, account_filter={name: "yes"})
    apply(
        acme,
        group("l1", "Literal", {name: "yes"}),
        group("n1", "Nested", {"a": {"b": "yes"}}),
        track("l1", "Login"),
        track("n1", "Login"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    assert set(account_scores(acme)) == {"Literal"}


def test_tenure_from_created_at_trait_else_first_seen(acme):
    created = (datetime.now(UTC) - timedelta(days=100)).date().isoformat()
    apply(
        acme,
        identify("old", {"createdAt": created}, days_ago=5),
        identify("new", {"name": "New"}, days_ago=5),
        identify("odd", {"createdAt": "2024-02-31"}, days_ago=3),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    scores = user_scores(acme)
    assert scores["old"].tenure_days == 100
    assert scores["new"].tenure_days == 5
    assert scores["odd"].tenure_days == 3  # not a date: first seen instead


def snapshot(tenant) -> dict:
    fields = [
        "engagement_score",
        "score_change",
        "raw_score",
        "active_days",
        "events_in_window",
        "adoption",
        "score_breakdown",
        "previous_raw_score",
        "previous_score",
        "tenure_days",
    ]
    users = {k: [getattr(s, f) for f in fields] for k, s in user_scores(tenant).items()}
    accounts = {
        k: [getattr(s, f) for f in [*fields, "active_users", "total_users", "last_seen"]]
        for k, s in account_scores(tenant).items()
    }
    return {
        "users": users,
        "accounts": accounts,
        "ranks": {kind: ranks(tenant, kind) for kind in ("user", "account")},
    }


def test_incremental_refresh_equals_full_rescore(five_users):
    workspace_rescore(workspace_id=five_users.workspace.id)
    # New events move p90 and so the scores of users that had no new events.
    apply(
        five_users,
        track("u2", "Report_Created", times=5),
        track("u7", "Login", account="B"),
        track("u5", "Login", days_ago=8),
        group("u4", "B"),
    )
    result = workspace_refresh(workspace_id=five_users.workspace.id)
    assert result.mode == "incremental"
    incremental = snapshot(five_users)
    workspace_rescore(workspace_id=five_users.workspace.id)
    assert snapshot(five_users) == incremental
    assert incremental["users"]["u2"][2] == 16  # 15 + 1


def kept_histograms(tenant) -> tuple[list[int], list[int]]:
    state = ScoringState.objects.get(workspace=tenant.workspace)
    return state.user_scores, state.account_scores


def test_incremental_refreshes_in_a_row_keep_ranks_and_histograms_of_a_full_rescore(
    five_users, settings
):
    # Each refresh ranks from the histograms the previous ones kept: after several, ranks,
    # scores and the kept users and accounts per score are still those of a full rescore.
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    workspace_rescore(workspace_id=five_users.workspace.id)
    draw = random.Random(20261125)
    users = [f"u{n}" for n in range(1, 13)]
    for round_ in range(5):
        batch = [
            track(
                draw.choice(users),
                draw.choice(["Login", "Report_Created"]),
                times=draw.randint(1, 4),
            )
            for _ in range(3)
        ]
        if round_ % 2:
            batch.append(group(draw.choice(users), draw.choice(["A", "B", "C"]), days_ago=0))
        apply(five_users, *batch)
        result = workspace_refresh(workspace_id=five_users.workspace.id)
        assert result.mode == "incremental"
    incremental, kept = snapshot(five_users), kept_histograms(five_users)
    workspace_rescore(workspace_id=five_users.workspace.id)
    assert snapshot(five_users) == incremental
    assert kept_histograms(five_users) == kept
    assert sum(kept[0]) == UserScore.objects.filter(workspace=five_users.workspace).count()


@pytest.mark.parametrize("kept", [[], [1] * 101], ids=["never-counted", "not-adding-up"])
def test_a_kept_histogram_missing_or_wrong_is_counted_afresh(five_users, settings, kept):
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    workspace_rescore(workspace_id=five_users.workspace.id)
    counted = kept_histograms(five_users)[0]
    ScoringState.objects.filter(workspace=five_users.workspace).update(user_scores=kept)
    apply(five_users, track("u4", "Report_Created", times=3))
    assert workspace_refresh(workspace_id=five_users.workspace.id).mode == "incremental"
    incremental, histogram = snapshot(five_users), kept_histograms(five_users)[0]
    workspace_rescore(workspace_id=five_users.workspace.id)
    assert snapshot(five_users) == incremental
    assert histogram == kept_histograms(five_users)[0] != counted


def test_refresh_is_idle_when_nothing_changed_and_due_when_events_arrive(acme, settings):
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    apply(acme, track("u1", "Login"))
    assert workspace_refresh_is_due(workspace=acme.workspace)
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "full"
    assert not workspace_refresh_is_due(workspace=acme.workspace)
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "idle"
    apply(acme, track("u1", "Login"))
    assert workspace_refresh_is_due(workspace=acme.workspace)
    result = workspace_refresh(workspace_id=acme.workspace.id)
    assert (result.mode, result.users) == ("incremental", 1)
    assert user_scores(acme)["u1"].raw_score == 2


def test_changed_weights_trigger_a_full_rescore(acme, settings):
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    apply(acme, track("u1", "Login"), track("u2", "Export"))
    workspace_refresh(workspace_id=acme.workspace.id)
    EventWeight.objects.create(workspace=acme.workspace, event_name="Export", weight=0)
    assert workspace_refresh_is_due(workspace=acme.workspace)
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "full"
    assert user_scores(acme)["u2"].raw_score == 0


def test_new_link_without_events_updates_the_account(acme, settings):
    settings.SCORING_WATERMARK_OVERLAP_SECONDS = 0
    apply(acme, group("u1", "A"), track("u1", "Login"))
    workspace_refresh(workspace_id=acme.workspace.id)
    assert account_scores(acme)["A"].engagement_score == 100
    apply(acme, group("u2", "A", days_ago=0))
    assert Membership.objects.filter(account__tracking_id="A").count() == 2
    workspace_refresh(workspace_id=acme.workspace.id)
    account = account_scores(acme)["A"]
    assert (account.engagement_score, account.total_users, account.active_users) == (50, 2, 1)


def test_products_never_mix(acme, globex):
    apply(acme, track("u1", "Login", times=3))
    apply(globex, track("u1", "Login"))
    workspace_rescore(workspace_id=acme.workspace.id)
    workspace_rescore(workspace_id=globex.workspace.id)
    assert user_scores(acme)["u1"].raw_score == 3
    assert user_scores(globex)["u1"].raw_score == 1
    assert UserScore.objects.filter(workspace=acme.workspace).count() == 1


def test_full_rescore_over_scored_rows_matches_a_first_rescore(five_users):
    workspace_rescore(workspace_id=five_users.workspace.id)
    EventWeight.objects.filter(workspace=five_users.workspace, event_name="Report_Created").update(
        weight=5
    )
    apply(five_users, track("u8", "Login", times=2))
    workspace_rescore(workspace_id=five_users.workspace.id)  # updates rows, inserts u8
    over_scored_rows = snapshot(five_users)
    UserScore.objects.filter(workspace=five_users.workspace).delete()
    AccountScore.objects.filter(workspace=five_users.workspace).delete()
    workspace_rescore(workspace_id=five_users.workspace.id)
    assert snapshot(five_users) == over_scored_rows
    assert over_scored_rows["users"]["u1"][2] == 11  # 2 x 5 + 1
    assert over_scored_rows["users"]["u8"][2] == 2


def test_full_rescore_gives_a_row_to_a_user_seen_since_the_last_one_without_events(
    five_users, globex
):
    workspace_rescore(workspace_id=five_users.workspace.id)
    apply(five_users, identify("u9", {"plan": "pro"}))
    # Another workspace's score row does not stand in for u9's: counted across workspaces, the
    # rows would equal Acme's users and the search for users without a row would be skipped.
    apply(globex, identify("g1", {}))
    workspace_rescore(workspace_id=globex.workspace.id)

    workspace_rescore(workspace_id=five_users.workspace.id)

    scores = user_scores(five_users)
    assert scores["u9"].engagement_score == 0
    assert len(scores) == five_users.product.users.count()


def test_full_rescore_leaves_unchanged_rows_alone(five_users):
    first = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    workspace_rescore(workspace_id=five_users.workspace.id, now=first)
    workspace_rescore(workspace_id=five_users.workspace.id, now=first + timedelta(minutes=5))
    computed = set(
        UserScore.objects.filter(workspace=five_users.workspace).values_list(
            "computed_at", flat=True
        )
    )
    assert computed == {first}


def stored_breakdowns(tenant) -> dict[str, dict[str, str]]:
    """The breakdown text of every score row as stored, by user and account id."""
    with connection.cursor() as cursor:
        texts = {}
        for kind in ("user", "account"):
            cursor.execute(
                f"SELECT {kind}_id, score_breakdown FROM engagement_{kind}score "  # noqa: S608
                "WHERE workspace_id = %s",
                [tenant.workspace.id],
            )
            texts[kind] = dict(cursor.fetchall())
    return texts


def test_a_breakdown_is_stored_the_same_by_an_incremental_refresh_and_a_full_rescore(five_users):
    # Stored in event name order, whatever order the SQL grouped the events in: a rescore that
    # changes nothing then rewrites no row of a user or account an incremental refresh wrote.
    apply(five_users, track("u1", "Zoom_Call"), track("u1", "Alpha_Sync", times=2))
    workspace_rescore(workspace_id=five_users.workspace.id)
    apply(five_users, track("u1", "Login"), track("u2", "Zoom_Call", account="A"))
    assert workspace_refresh(workspace_id=five_users.workspace.id).mode == "incremental"
    incremental = stored_breakdowns(five_users)
    workspace_rescore(workspace_id=five_users.workspace.id)
    assert stored_breakdowns(five_users) == incremental
    u1 = five_users.product.users.get(tracking_id="u1").id
    assert [item[0] for item in json.loads(incremental["user"][u1])] == [
        "Alpha_Sync",
        "Login",
        "Report_Created",
        "Zoom_Call",
    ]
    # Served biggest points first, ties by name.
    served = user_scores(five_users)["u1"].score_breakdown
    assert [(item["event"], item["points"]) for item in served] == [
        ("Report_Created", 6),
        ("Alpha_Sync", 2),
        ("Login", 2),
        ("Zoom_Call", 1),
    ]


ESCAPED_NAMES = ['Report "Q3"', "C:\\exports\\daily", "Café ✓", "tab\there"]


def test_event_names_are_escaped_in_the_breakdown_however_they_are_spelt(acme):
    # PostgreSQL looks each name's JSON text up, escaped once per refresh; a name the product's
    # event names lack (none should) is escaped where it is used. Both read back as sent.
    apply(acme, *(track("u1", name, times=i + 1) for i, name in enumerate(ESCAPED_NAMES)))
    acme.product.event_names.filter(name=ESCAPED_NAMES[0]).delete()
    workspace_rescore(workspace_id=acme.workspace.id)
    served = {item["event"]: item["count"] for item in user_scores(acme)["u1"].score_breakdown}
    assert served == {name: i + 1 for i, name in enumerate(ESCAPED_NAMES)}
    u1 = acme.product.users.get(tracking_id="u1").id
    stored = json.loads(stored_breakdowns(acme)["user"][u1])
    assert sorted(item[0] for item in stored) == sorted(ESCAPED_NAMES)


def test_accounts_and_users_leaving_the_filter_lose_their_scores(acme):
    configure(acme, account_filter={"plan": "enterprise"})
    apply(
        acme,
        group("e1", "E", {"plan": "enterprise"}),
        group("g1", "G", {"plan": "enterprise"}),
        track("e1", "Login"),
        track("g1", "Login"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    assert set(account_scores(acme)) == {"E", "G"}
    # G downgrades: it and its user leave on the next (incremental) refresh.
    apply(acme, group("g1", "G", {"plan": "free"}, days_ago=0))
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "incremental"
    assert (set(account_scores(acme)), set(user_scores(acme))) == ({"E"}, {"e1"})
    # The filter changes: a full rescore drops everyone the new filter leaves out.
    configure(acme, account_filter={"plan": "free"})
    workspace_rescore(workspace_id=acme.workspace.id)
    assert (set(account_scores(acme)), set(user_scores(acme))) == ({"G"}, {"g1"})


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_a_full_rescore_leaves_the_score_tables_statistics_current(five_users):
    # Statistics saying "empty" after a first rescore made the next rank update take minutes.
    workspace_rescore(workspace_id=five_users.workspace.id)

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, reltuples FROM pg_class "
            "WHERE relname IN ('engagement_userscore', 'engagement_accountscore')"
        )
        planned = dict(cursor.fetchall())
    assert planned == {
        "engagement_userscore": UserScore.objects.count(),
        "engagement_accountscore": AccountScore.objects.count(),
    }
