"""A track that names an account (`context.groupId`) links its user to that account when they
are not linked yet, as a group call without traits would, on every door and both drain routes
(PostgreSQL's staged SQL, the generic one SQLite takes); the account's score, the mean of its
users' scores, then counts that user, and the account page and the read API say so."""

import html
import json

import pytest
from django.db import connection

from engagement.erasure import erasure_request, erasure_run
from engagement.models import (
    Account,
    AccountScore,
    Erasure,
    Membership,
    ProductMembership,
    User,
)
from engagement.scoring import workspace_refresh, workspace_rescore
from engagement.services import Message
from ingestion.services import apply as apply_module
from tests.dashboard.conftest import PASSWORD, signed_in
from tests.engagement.helpers import apply, group, identify, ms, track
from tests.ingestion.segment_support import segment_auth

pytestmark = pytest.mark.both_databases

PAGE_SENTENCE = "Its score is the mean of its 1 user's score."
NO_USERS = (
    "No users are linked to this account, so it has no score: "
    "its score is the mean of its users' scores."
)


@pytest.fixture
def vera(acme, django_user_model):
    """A viewer of Acme, as the dashboard tests' vera."""
    person = django_user_model.objects.create_user("vera", "vera@example.com", PASSWORD)
    ProductMembership.objects.create(user=person, product=acme.product)
    return person


@pytest.fixture
def routes(monkeypatch) -> list[str]:
    """The drain routes taken, in order: "staged" (PostgreSQL's SQL) or "loaded" (generic)."""
    taken: list[str] = []
    staged, loaded = apply_module.apply_staged, apply_module.apply_loaded

    def apply_staged(*args, **kwargs):
        taken.append("staged")
        return staged(*args, **kwargs)

    def apply_loaded(*args, **kwargs):
        taken.append("loaded")
        return loaded(*args, **kwargs)

    monkeypatch.setattr(apply_module, "apply_staged", apply_staged)
    monkeypatch.setattr(apply_module, "apply_loaded", apply_loaded)
    return taken


def expected_route() -> str:
    return "staged" if connection.vendor == "postgresql" else "loaded"


def links(tenant) -> list[tuple[str, str]]:
    return sorted(
        Membership.objects.filter(user__product=tenant.product).values_list(
            "user__tracking_id", "account__tracking_id"
        )
    )


def account_record(api_client, tenant, account: Account) -> dict:
    response = api_client.get(
        f"/v2/accounts/{account.id}",
        {"workspace_id": tenant.workspace.id},
        HTTP_AUTHORIZATION=tenant.bearer,
    )
    assert response.status_code == 200
    return response.json()


def account_page(person, tenant, account: Account) -> str:
    response = signed_in(person).get(f"/w/{tenant.workspace.id}/accounts/{account.id}/")
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def test_a_user_identified_without_a_group_joins_the_account_their_tracks_name(
    acme, post_json, api_client, drain, routes, vera
):
    post_json("/v2/identify", {"userId": "ann", "traits": {"name": "Ann"}}, auth=acme.basic)
    drain()
    assert workspace_rescore(workspace_id=acme.workspace.id).mode == "full"

    for n in range(3):
        response = post_json(
            "/v2/track",
            {
                "userId": "ann",
                "event": "Report_Created",
                "context": {"groupId": "initech"},
                "timestamp": ms(hours=n * 0.01),
            },
            auth=acme.basic,
        )
        assert response.status_code == 202
    drain()

    assert routes[-1] == expected_route()
    assert links(acme) == [("ann", "initech")]
    account = Account.objects.get(product=acme.product, tracking_id="initech")
    link = Membership.objects.get(user__tracking_id="ann", account=account)
    assert round(link.linked_at.timestamp() * 1000) == ms(hours=0.02)  # the latest track's time
    # The next refresh notices the new link incrementally and counts Ann in the account's mean.
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "incremental"
    score = AccountScore.objects.get(account=account, workspace=acme.workspace)
    assert (score.total_users, score.active_users, score.engagement_score) == (1, 1, 100)

    page = account_page(vera, acme, account)
    assert PAGE_SENTENCE in page
    assert "The account's events" in page
    assert NO_USERS not in page
    record = account_record(api_client, acme, account)
    assert record["engagement_score"] == 100
    assert record["score_basis"] == {"kind": "users_mean", "users": 1, "description": PAGE_SENTENCE}


# (door, path, what the track carries besides user, event and time, content type): the account
# named in context.groupId (a top-level groupId on v1 events), sent as that door's clients do.
DOORS = [
    ("v2 track", "/v2/track", {"context": {"groupId": "initech"}}, "application/json"),
    ("v1 events", "/v1/events", {"context": {"groupId": "initech"}}, "application/json"),
    ("v1 events group_id", "/v1/events", {"group_id": "initech"}, "application/json"),
    (
        "segment",
        "/segment",
        {"type": "track", "context": {"groupId": "initech"}},
        "application/json",
    ),
    (
        "segment page",
        "/segment",
        {"type": "page", "name": "Home", "context": {"groupId": "initech"}},
        "application/json",
    ),
    ("v1 track", "/v1/track", {"context": {"groupId": "initech"}}, "application/json"),
    ("v1 batch", "/v1/batch", {"context": {"groupId": "initech"}}, "application/json"),
    # The tracker's way: /v1/batch as text/plain, the key in the body (no preflight).
    ("tracker", "/v1/batch", {"context": {"groupId": "initech"}}, "text/plain"),
]


def door_request(acme, path: str, carried: dict, content_type: str) -> tuple[str, dict]:
    """The body and headers of one track of Ann naming Initech, as this door's clients send it."""
    if path == "/v1/events":
        body = {"user_id": "ann", "event": "Report_Created", "timestamp": ms(), **carried}
        return json.dumps({**body, "api_key": acme.key.key}), {}
    message = {"userId": "ann", "event": "Report_Created", "timestamp": ms(), **carried}
    if path == "/v2/track":
        return json.dumps(message), {"HTTP_AUTHORIZATION": acme.basic}
    if path == "/v1/batch":
        batch = [{"type": "track", **message}]
        if content_type == "text/plain":
            return json.dumps({"batch": batch, "writeKey": acme.key.key}), {}
        message = {"batch": batch}
    return json.dumps(message), {"HTTP_AUTHORIZATION": segment_auth(acme.key.key)}


@pytest.mark.parametrize(
    ("door", "path", "carried", "content_type"), DOORS, ids=[door[0] for door in DOORS]
)
def test_every_door_links_the_user_to_the_account_a_track_names(
    acme, api_client, drain, routes, door, path, carried, content_type
):
    body, headers = door_request(acme, path, carried, content_type)

    response = api_client.generic("POST", path, body, content_type=content_type, **headers)
    assert response.status_code in (200, 202), response.content
    drain()

    assert routes == [expected_route()]
    assert links(acme) == [("ann", "initech")]
    # Created as a group call naming a new account creates it: not yet identified.
    assert Account.objects.get(product=acme.product, tracking_id="initech").identified is False


def test_a_link_that_exists_is_kept_as_it_is_and_a_second_account_is_added(acme, drain, post_json):
    apply(acme, group("ann", "initech", {"name": "Initech"}, days_ago=40))
    linked_at = Membership.objects.get(account__tracking_id="initech").linked_at

    for account in ("initech", "hooli"):
        post_json(
            "/v2/track",
            {"userId": "ann", "event": "E", "context": {"groupId": account}, "timestamp": ms()},
            auth=acme.basic,
        )
    drain()

    assert links(acme) == [("ann", "hooli"), ("ann", "initech")]
    assert Membership.objects.get(account__tracking_id="initech").linked_at == linked_at
    # The account's identity and traits are the group call's, untouched by the tracks.
    initech = Account.objects.get(product=acme.product, tracking_id="initech")
    assert (initech.identified, initech.traits) == (True, {"name": "Initech"})


def test_a_group_call_and_tracks_in_one_batch_link_once_at_the_latest_time(acme):
    apply(
        acme,
        group("ann", "initech", days_ago=2),
        track("ann", "E", account="initech", days_ago=1),
        track("bob", "E", account="initech", days_ago=3),
        track("bob", "E", account="initech", days_ago=1),
        track("cy", "E"),  # names no account: no link
    )

    assert links(acme) == [("ann", "initech"), ("bob", "initech")]
    times = dict(
        Membership.objects.filter(account__tracking_id="initech").values_list(
            "user__tracking_id", "linked_at"
        )
    )
    # Ann's group call (2 days ago) and track (1 day ago): the later; Bob's tracks: the latest.
    assert {user: round(at.timestamp() * 1000) for user, at in times.items()} == {
        "ann": ms(1),
        "bob": ms(1),
    }


def test_an_alias_merged_id_links_the_user_it_was_merged_into(acme):
    apply(
        acme,
        identify("ann", {"name": "Ann"}),
        [Message(message_type="alias", timestamp_ms=ms(5), user_id="ann", previous_id="anon-1")],
    )

    apply(acme, track("anon-1", "E", account="initech"))

    assert links(acme) == [("ann", "initech")]
    assert not User.objects.filter(product=acme.product, tracking_id="anon-1").exists()


def test_an_account_with_events_and_no_users_says_why_it_has_no_score(acme, api_client, vera):
    # Events stored for an account whose user was then unlinked (data from before tracks linked).
    apply(acme, identify("ann", {"name": "Ann"}), track("ann", "Report_Created", account="legacy"))
    Membership.objects.filter(account__tracking_id="legacy").delete()
    workspace_rescore(workspace_id=acme.workspace.id)
    account = Account.objects.get(product=acme.product, tracking_id="legacy")
    score = AccountScore.objects.get(account=account, workspace=acme.workspace)
    assert (score.raw_score, score.total_users, score.engagement_score) == (1, 0, 0)

    page = account_page(vera, acme, account)
    assert NO_USERS in page
    assert '<span class="figure" id="score">–</span>' in page  # no bare 0 beside the sentence
    assert "Report_Created" in page  # its events, labelled as the account's
    assert "The account's events" in page
    record = account_record(api_client, acme, account)
    assert record["score_basis"] == {"kind": "no_users", "users": 0, "description": NO_USERS}


def test_an_account_not_scored_yet_says_so(acme, api_client, vera):
    apply(acme, group("ann", "initech"))
    account = Account.objects.get(product=acme.product, tracking_id="initech")

    record = account_record(api_client, acme, account)

    assert record["score_basis"]["kind"] == "not_scored"
    assert "Not scored yet" in account_page(vera, acme, account)


def test_an_account_above_others_counts_their_users_and_says_so(acme, api_client, vera):
    apply(
        acme,
        group("ann", "parent"),
        group("bob", "child", {"parent_group_id": "parent"}),
        track("ann", "E", account="parent"),
        track("bob", "E", account="child"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    parent = Account.objects.get(product=acme.product, tracking_id="parent")

    assert account_record(api_client, acme, parent)["score_basis"]["users"] == 2
    assert (
        "Its score is the mean of its 2 users' scores (its own and those of the accounts "
        "under it)." in account_page(vera, acme, parent)
    )


def test_a_track_naming_a_suppressed_account_links_no_one(acme, post_json, drain, routes):
    apply(acme, group("eve", "secret"))
    erasure = erasure_request(
        product_id=acme.product.id,
        kind=Erasure.Kind.ACCOUNT,
        target_id=Account.objects.get(tracking_id="secret").id,
        suppress=True,
        via=Erasure.Via.COMMAND,
    )
    erasure_run(erasure_id=erasure.id)

    body = {"userId": "ann", "event": "E", "context": {"groupId": "secret"}, "timestamp": ms()}
    assert post_json("/v2/track", body, auth=acme.basic).status_code == 202
    drain()

    assert routes == [expected_route()]
    assert not Account.objects.filter(product=acme.product, tracking_id="secret").exists()
    assert links(acme) == []
