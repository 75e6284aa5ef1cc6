"""alias(previousId → userId): the previous user's events, rollups, links, score history and
traits move onto the new id in one transaction; repeated, reordered or early aliases end the
same; a remembered previous id sends later messages to the merged user; scores, erasure and
suppression follow the merged person."""

import pytest

from engagement.erasure import erasure_request, erasure_run
from engagement.models import (
    Account,
    Event,
    EventRollup,
    Membership,
    ScoreHistoryBackfill,
    User,
    UserAlias,
    UserScoreDay,
)
from engagement.scoring import workspace_refresh
from engagement.services import Message
from ingestion.models import DroppedRequest
from tests.engagement.helpers import apply, group, identify, ms, track
from tests.ingestion.segment_support import segment_auth

pytestmark = pytest.mark.both_databases

VISITOR = "visitor-7"  # the id a product used before sign-up
ANN = "ann"


def alias(previous: str, user: str, *, days_ago: float = 0) -> list[Message]:
    return [
        Message(message_type="alias", timestamp_ms=ms(days_ago), user_id=user, previous_id=previous)
    ]


def state(product) -> dict:
    """What a user of the product would see of its people, whatever the internal ids."""
    return {
        "users": {
            u.tracking_id: (u.identified, u.traits, u.email)
            for u in User.objects.filter(product=product)
        },
        "events": sorted(
            Event.objects.filter(product=product).values_list(
                "user__tracking_id", "name", "account__tracking_id", "timestamp"
            )
        ),
        "rollups": sorted(
            EventRollup.objects.filter(product=product).values_list(
                "user__tracking_id", "event_name", "day", "count"
            )
        ),
        "links": sorted(
            Membership.objects.filter(user__product=product).values_list(
                "user__tracking_id", "account__tracking_id"
            )
        ),
    }


def test_the_previous_users_data_moves_onto_the_new_id(acme):
    apply(
        acme,
        identify(VISITOR, {"plan": "trial", "email": "old@acme.test"}, days_ago=5),
        group(VISITOR, "acme-co", days_ago=5),
        track(VISITOR, "Report_Created", days_ago=3, times=2),
        identify(ANN, {"email": "ann@acme.test"}, days_ago=1),
        group(ANN, "acme-co", days_ago=4),
        track(ANN, "Report_Created", days_ago=3),
    )

    apply(acme, alias(VISITOR, ANN))

    ann = User.objects.get(product=acme.product)
    assert ann.tracking_id == ANN
    # Per trait the later message wins: ann's email (1 day ago) over the visitor's (5).
    assert ann.traits == {"plan": "trial", "email": "ann@acme.test"}
    assert ann.email == "ann@acme.test" and ann.identified
    assert Event.objects.filter(user=ann).count() == 3
    # The same event, day and account: one rollup row, the counts added.
    assert list(EventRollup.objects.filter(user=ann).values_list("count", flat=True)) == [3]
    assert list(ann.memberships.values_list("account__tracking_id", flat=True)) == ["acme-co"]
    assert list(ann.aliases.values_list("previous_id", flat=True)) == [VISITOR]
    # Past days the history holds are recomputed by its next run.
    assert ScoreHistoryBackfill.objects.filter(workspace=acme.workspace).exists()


def test_an_alias_seen_again_changes_nothing(acme):
    apply(acme, track(VISITOR, "Exported", days_ago=2), alias(VISITOR, ANN))
    once = state(acme.product)

    apply(acme, alias(VISITOR, ANN))
    apply(acme, alias(VISITOR, ANN), track(ANN, "Exported", days_ago=9))

    again = state(acme.product)
    assert again["users"] == once["users"]
    assert len(again["events"]) == len(once["events"]) + 1


@pytest.mark.parametrize(
    "order",
    [
        ["track", "alias", "identify"],
        ["alias", "track", "identify"],
        ["identify", "alias", "track"],
        ["alias+track", "identify"],
    ],
)
def test_the_outcome_does_not_depend_on_the_order_of_the_calls(acme, order):
    calls = {
        "track": track(VISITOR, "Exported", days_ago=2),
        "alias": alias(VISITOR, ANN),
        "identify": identify(ANN, {"plan": "pro"}),
        "alias+track": alias(VISITOR, ANN) + track(VISITOR, "Exported", days_ago=2),
    }

    for call in order:
        apply(acme, calls[call])

    found = state(acme.product)
    assert found["users"] == {ANN: (True, {"plan": "pro"}, "")}
    assert [(user, name) for user, name, _, _ in found["events"]] == [(ANN, "Exported")]


def test_an_alias_before_any_message_sends_later_ones_to_the_new_user(acme):
    apply(acme, alias(VISITOR, ANN))

    apply(acme, track(VISITOR, "Exported"), group(VISITOR, "acme-co"))

    assert list(User.objects.values_list("tracking_id", flat=True)) == [ANN]
    assert Event.objects.get().user.tracking_id == ANN
    assert Membership.objects.get().user.tracking_id == ANN


def test_chained_aliases_follow_to_the_last_user(acme):
    apply(acme, track("a", "E"), alias("a", "b"), track("b", "E"), alias("b", "c"))

    apply(acme, track("a", "Later"))

    assert list(User.objects.values_list("tracking_id", flat=True)) == ["c"]
    assert sorted(UserAlias.objects.values_list("previous_id", flat=True)) == ["a", "b"]
    assert Event.objects.filter(user__tracking_id="c").count() == 3


def test_the_first_alias_of_a_previous_id_stands(acme):
    apply(acme, alias(VISITOR, ANN))

    apply(acme, alias(VISITOR, "bob"), track(VISITOR, "E"))

    assert Event.objects.get().user.tracking_id == ANN


def test_an_alias_to_itself_is_nothing(acme):
    apply(acme, track(ANN, "E"), alias(ANN, ANN))

    assert User.objects.get().tracking_id == ANN
    assert not UserAlias.objects.exists()


def test_scores_and_history_follow_the_merged_person(acme):
    apply(
        acme,
        group(VISITOR, "acme-co"),
        group(ANN, "acme-co"),
        track(VISITOR, "Report_Created", days_ago=2, times=3),
        track(ANN, "Report_Created", days_ago=1),
    )
    workspace_refresh(workspace_id=acme.workspace.id)
    UserScoreDay.objects.create(
        user=User.objects.get(tracking_id=VISITOR),
        workspace=acme.workspace,
        day=ms_day(2),
        engagement_score=40,
        raw_score=3,
    )

    apply(acme, alias(VISITOR, ANN))
    workspace_refresh(workspace_id=acme.workspace.id)

    ann = User.objects.get(tracking_id=ANN)
    assert ann.scores.get(workspace=acme.workspace).events_in_window == 4
    account = Account.objects.get(tracking_id="acme-co").scores.get(workspace=acme.workspace)
    assert (account.total_users, account.events_in_window) == (1, 4)
    assert UserScoreDay.objects.filter(user=ann, day=ms_day(2)).exists()


def ms_day(days_ago: int):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms(days_ago) / 1000, UTC).date()


def test_erasing_the_merged_user_suppresses_its_previous_ids_too(acme, post_json, drain):
    apply(acme, track(VISITOR, "E"), alias(VISITOR, ANN))
    ann = User.objects.get(tracking_id=ANN)

    erasure = erasure_request(
        product_id=acme.product.id, kind="user", target_id=ann.id, suppress=True, via="api"
    )
    erasure_run(erasure_id=erasure.id)
    body = {"batch": [{"type": "track", "userId": VISITOR, "event": "After"}]}
    post_json("/v1/batch", body, auth=segment_auth(acme.key.key))
    drain()

    assert not User.objects.exists()
    assert not UserAlias.objects.exists()
    assert not Event.objects.exists()
    assert DroppedRequest.objects.get().reason == "suppressed"
