"""Erasure of a user or an account: every row about them goes (events across daily partitions,
rollups, scores, score history, memberships, segment memberships, seen messageIds, waiting
messages), a database dump no longer holds their tracking id or email, an account's users
stay unlinked, and the record of the erasure holds counts and no personal data."""

import shutil
import subprocess
from datetime import UTC, date, datetime, timedelta

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection

from dashboard.overview_selectors import workspace_overview
from engagement.erasure import ErasureTargetMissing, erasure_run
from engagement.event_store import event_tallies_compact
from engagement.models import (
    Account,
    Erasure,
    Event,
    EventRollup,
    Membership,
    ScoringState,
    Segment,
    SegmentMember,
    User,
    UserScore,
    UserScoreDay,
)
from engagement.scoring import workspace_refresh
from engagement.services import event_partitions_maintain
from ingestion.models import AcceptedRequest, SeenMessage
from tests.engagement.helpers import apply, erase, group, identify, ms
from tests.engagement.helpers import track as tracked
from tests.ingestion.segment_support import iso_now, segment_auth, track

# Applies or scores data: runs on PostgreSQL and again on SQLite (make test's second pass).
pytestmark = pytest.mark.both_databases

ADA = "ada-tracking-7731"
ADA_EMAIL = "ada.lovelace@analytical.test"


def iso(days_ago: int) -> str:
    return (datetime.now(UTC) - timedelta(days=days_ago, minutes=5)).isoformat()


def send(post_json, tenant, path: str, body: dict) -> None:
    assert post_json(path, body, auth=tenant.basic).status_code == 202


@pytest.fixture
def ada_everywhere(acme, post_json, drain):
    """Ada through the doors: identified with her email, in two accounts, events on three days
    each with a messageId that embeds her tracking id, scored, in a segment, with a day of
    score history; Bob, in one of her accounts, stays."""
    if connection.vendor == "postgresql":  # daily partitions from four days back
        event_partitions_maintain(today=datetime.now(UTC).date() - timedelta(days=4))
    send(post_json, acme, "/v2/identify", {"userId": ADA, "traits": {"email": ADA_EMAIL}})
    for account in ("acct-one", "acct-two"):
        send(post_json, acme, "/v2/group", {"userId": ADA, "groupId": account})
    send(post_json, acme, "/v2/group", {"userId": "bob", "groupId": "acct-one"})
    items = [
        track(ADA, "Opened", timestamp=iso(days_ago), messageId=f"{ADA}-{days_ago}-{n}")
        for days_ago in (0, 1, 3)
        for n in range(2)
    ]
    batch = {"batch": items, "sentAt": iso_now()}
    assert post_json("/v1/batch", batch, auth=segment_auth(acme.key.key)).status_code == 200
    send(post_json, acme, "/v2/track", {"userId": "bob", "event": "Opened", "groupId": "acct-one"})
    drain()
    workspace_refresh(workspace_id=acme.workspace.id)
    ada = User.objects.get(product=acme.product, tracking_id=ADA)
    UserScoreDay.objects.create(
        user=ada, workspace=acme.workspace, day=date.today() - timedelta(days=1),
        engagement_score=50, raw_score=2,
    )  # fmt: skip
    segment = Segment.objects.create(workspace=acme.workspace, name="All", target="users")
    SegmentMember.objects.create(segment=segment, user=ada, joined_at=datetime.now(UTC))
    # A message for her accepted but not applied yet.
    send(post_json, acme, "/v2/track", {"userId": ADA, "event": "Late"})
    return ada


@pytest.mark.postgresql
def test_a_user_is_erased_from_every_table(acme, ada_everywhere):
    ada = ada_everywhere
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(DISTINCT tableoid) FROM engagement_event WHERE user_id = %s", [ada.id]
        )
        assert cursor.fetchone()[0] >= 3  # her events lie in several daily partitions
    assert SeenMessage.objects.filter(message_id__startswith=ADA).count() == 6

    erasure = erase(acme, ada, admin_user_id=7)

    assert erasure.status == Erasure.Status.COMPLETED
    assert erasure.counts["events"] == 6
    assert erasure.counts["memberships"] == 2
    assert erasure.counts["segment_memberships"] == 1
    assert erasure.counts["score_days"] == 1
    assert erasure.counts["seen_messages"] == 6
    assert erasure.counts["accepted_messages"] == 1
    assert not User.objects.filter(tracking_id=ADA).exists()
    assert not Event.objects.filter(user_id=ada.id).exists()
    assert not EventRollup.objects.filter(user_id=ada.id).exists()
    assert not UserScore.objects.filter(user_id=ada.id).exists()
    assert not Membership.objects.filter(user_id=ada.id).exists()
    # Bob and both accounts stay; the workspace rescores in full at its next refresh.
    assert User.objects.filter(tracking_id="bob").exists()
    assert Account.objects.filter(product=acme.product).count() == 2
    assert ScoringState.objects.get(workspace=acme.workspace).config_digest == ""
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "full"
    assert erasure.requested_by_admin_id == 7


@pytest.mark.postgresql
def test_the_late_message_is_dropped_as_erased_not_applied(acme, ada_everywhere, drain):
    erase(acme, ada_everywhere)
    drain()
    assert not User.objects.filter(tracking_id=ADA).exists()
    assert not AcceptedRequest.objects.exists()


@pytest.mark.postgresql
def test_a_dump_of_the_database_holds_neither_tracking_id_nor_email(
    transactional_db, acme, ada_everywhere, drain
):
    pg_dump = shutil.which("pg_dump")
    assert pg_dump, "pg_dump is needed for this test"
    settings = connection.settings_dict

    def dump() -> str:
        return subprocess.run(
            [pg_dump, "-h", settings["HOST"] or "127.0.0.1", "-p", str(settings["PORT"] or 5432),
             "-U", settings["USER"] or "postgres", "--data-only", settings["NAME"]],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip

    before = dump()
    assert ADA in before and ADA_EMAIL in before  # the dump does see her while she is there

    erasure = erase(acme, ada_everywhere)
    drain()  # the late message, now a drop marker, leaves the store

    after = dump()
    assert ADA not in after
    assert ADA_EMAIL not in after
    record = Erasure.objects.get(id=erasure.id)
    assert ADA not in str(record.counts) and record.target_id == ada_everywhere.id


def test_an_account_is_erased_and_its_users_stay_unlinked(acme):
    apply(
        acme,
        identify("u1", {"email": "u1@corp.test"}),
        group("u1", "corp", {"name": "Corp"}),
        tracked("u1", "Opened", account="corp", times=3),
        tracked("u1", "Opened", times=2),  # her only account's too, by her membership
    )
    corp = Account.objects.get(product=acme.product, tracking_id="corp")
    workspace_refresh(workspace_id=acme.workspace.id)

    erasure = erase(acme, corp, kind=Erasure.Kind.ACCOUNT)

    assert erasure.counts["accounts"] == 1
    assert erasure.counts["memberships"] == 1
    assert erasure.counts["events_unlinked"] == 5
    assert not Account.objects.filter(tracking_id="corp").exists()
    user = User.objects.get(tracking_id="u1")
    assert Event.objects.filter(user=user, account__isnull=True).count() == 5
    # Her rollups of that day become one row without an account, with every event.
    rollups = EventRollup.objects.filter(user=user)
    assert [(r.account_key, r.count) for r in rollups] == [(0, 5)]
    workspace_refresh(workspace_id=acme.workspace.id)
    assert UserScore.objects.get(user=user, workspace=acme.workspace).events_in_window == 5


def test_an_erasure_of_another_products_user_is_refused(acme, globex):
    apply(globex, identify("g1", {}))
    stranger = User.objects.get(product=globex.product)
    with pytest.raises(ErasureTargetMissing):
        erase(acme, stranger)
    assert User.objects.filter(id=stranger.id).exists()


def test_the_admin_action_asks_then_erases(acme, admin_client, django_capture_on_commit_callbacks):
    apply(acme, identify("u9", {"email": "u9@x.test"}))
    user = User.objects.get(tracking_id="u9")
    url = "/admin/engagement/user/"
    asked = admin_client.post(url, {"action": "erase", "_selected_action": [user.id]})
    assert asked.status_code == 200 and b"Yes, erase" in asked.content
    assert not Erasure.objects.exists()
    with django_capture_on_commit_callbacks() as queued:
        admin_client.post(
            url,
            {
                "action": "erase",
                "_selected_action": [user.id],
                "confirmed": "yes",
                "suppress": "on",
            },
        )
    erasure = Erasure.objects.get()
    assert len(queued) == 1 and erasure.via == "admin" and erasure.suppress
    assert erasure_run(erasure_id=erasure.id).status == Erasure.Status.COMPLETED


def test_the_erase_command_erases_by_tracking_id(acme, capsys):
    apply(acme, identify("u8", {"email": "u8@x.test"}))
    call_command("erase", "--product", str(acme.product.id), "--user", "u8")
    assert '"status": "completed"' in capsys.readouterr().out
    assert not User.objects.filter(tracking_id="u8").exists()


def overview_events(tenant) -> tuple[dict[date, int], list[tuple[str, int]]]:
    cache.clear()  # the overview is cached a while; each look here is a fresh one
    figures = workspace_overview(workspace=tenant.workspace)
    return {d.day: d.count for d in figures.events_per_day if d.count}, figures.top_events


def test_an_erased_users_events_leave_the_overviews_events_per_day_and_top_events(acme):
    apply(
        acme,
        tracked("ann", "Opened", times=3),
        tracked("ann", "Opened", days_ago=1),
        tracked("ann", "Exported", days_ago=1, times=2),  # nobody else's
        tracked("bob", "Opened", times=2),
    )
    today, yesterday = (datetime.fromtimestamp(ms(d) / 1000, UTC).date() for d in (0, 1))
    assert overview_events(acme) == (
        {today: 5, yesterday: 3},
        [("Opened", 6), ("Exported", 2)],
    )

    erase(acme, User.objects.get(product=acme.product, tracking_id="ann"))

    per_day, top = overview_events(acme)
    assert per_day == {today: 2}
    assert dict(top) == {"Opened": 2}  # an event only ann sent sums to 0: not a top event
    # Folded, the tallies keep the sums and no longer hold an event nobody else sent.
    assert event_tallies_compact() > 0
    assert overview_events(acme) == ({today: 2}, [("Opened", 2)])
