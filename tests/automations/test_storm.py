"""Bulk arrivals never storm: per automation and refresh, at most AUTOMATION_MAX_PER_REFRESH
single messages (the highest scores first), then one digest counting the rest, whichever door
brought them (messages applied, a marketplace sync, a /v1/import of historical data)."""

import json

import pytest
from django.test import Client
from django.urls import reverse
from standardwebhooks.webhooks import Webhook

from automations.delivery import delivery_attempt
from automations.models import AutomationFiring, Delivery
from automations.services import automation_create, automation_switch_off
from engagement.models import Account, AccountScore, ProductMembership, Segment
from engagement.scoring import workspace_refresh
from marketplace import services as marketplace_services
from marketplace.fake import FakeMarketplace
from marketplace.models import SyncRun
from tests.engagement.helpers import apply, group, track
from tests.ingestion.segment_support import iso_now, segment_auth
from tests.marketplace.conftest import EMAIL, TOKEN, VENDOR_ID, run_until_done

pytestmark = pytest.mark.both_databases

ARRIVALS = 300


@pytest.fixture
def scored_acme(acme):
    """Acme scored once (the baseline: the first scoring fires nothing), with Initech busy."""
    apply(acme, group("ann", "initech"), track("ann", "Report", times=20, account="initech"))
    workspace_refresh(workspace_id=acme.workspace.id)
    return acme


@pytest.fixture
def new_account_hooks(scored_acme, receiver):
    """A new_account automation to a webhook and one to Slack (both on the local receiver)."""
    workspace = scored_acme.workspace
    return [
        automation_create(
            workspace=workspace, trigger="new_account", url=receiver.url, name="New accounts"
        ),
        automation_create(
            workspace=workspace,
            trigger="new_account",
            url=receiver.url,
            name="New accounts to Slack",
            destination="slack",
        ),
    ]


def _arrive(tenant, count: int = ARRIVALS) -> None:
    """`count` accounts arrive in one batch, each with a user of its own and some activity (how
    much varies, so their scores do)."""
    batches = []
    for index in range(count):
        user, account = f"u{index:03}", f"arrival{index:03}"
        batches.append(group(user, account, {"cohort": "arrivals"}))
        batches.append(track(user, "Report", times=index % 9 + 1, account=account))
    apply(tenant, *batches)


def _singles_and_digests(automation) -> tuple[list[Delivery], list[Delivery]]:
    deliveries = list(Delivery.objects.filter(automation=automation).order_by("id"))
    digests = [d for d in deliveries if d.event_type.endswith(".digest")]
    return [d for d in deliveries if d not in digests], digests


def _highest_scores_first(tenant, account_ids: set[int], count: int) -> list[int]:
    rows = AccountScore.objects.filter(workspace=tenant.workspace, account_id__in=account_ids)
    return list(
        rows.order_by("-engagement_score", "account_id").values_list("account_id", flat=True)
    )[:count]


def _automation_page(automation) -> str:
    path = reverse(
        "automations:detail",
        kwargs={"workspace_id": automation.workspace_id, "automation_id": automation.id},
    )
    return f"http://testserver.example{path}"


def test_300_accounts_in_one_batch_send_20_messages_and_one_digest_per_automation(
    scored_acme, new_account_hooks, settings
):
    settings.PUBLIC_URL = "http://testserver.example"
    assert settings.AUTOMATION_MAX_PER_REFRESH == 20  # the default
    _arrive(scored_acme)
    workspace_refresh(workspace_id=scored_acme.workspace.id)

    arrived = set(
        Account.objects.filter(
            product=scored_acme.product, tracking_id__startswith="arrival"
        ).values_list("id", flat=True)
    )
    assert len(arrived) == ARRIVALS
    top_20 = _highest_scores_first(scored_acme, arrived, 20)
    for automation in new_account_hooks:
        singles, digests = _singles_and_digests(automation)
        assert len(singles) == 20 and len(digests) == 1
        # The 20 with the highest scores (then the lowest ids) had a message of their own.
        assert sorted(d.subject_id for d in singles) == sorted(top_20)
        assert {d.event_type for d in singles} == {"account.created"}
        (digest,) = digests
        assert digest.event_type == "account.digest" and digest.subject_id is None
        assert digest.payload["type"] == "account.digest"
        data = digest.payload["data"]
        assert data["count"] == ARRIVALS - 20
        assert data["automation"] == {"id": automation.id, "name": automation.name}
        assert data["trigger"] == {"type": "new_account"}
        assert data["subjects_url"] == _automation_page(automation)
        # Those past the limit count as fired: none of the 300 fires again.
        fired = AutomationFiring.objects.filter(automation=automation)
        assert set(fired.values_list("subject_id", flat=True)) == arrived


def test_those_past_the_limit_do_not_fire_at_the_next_refresh(scored_acme, new_account_hooks):
    _arrive(scored_acme)
    workspace_refresh(workspace_id=scored_acme.workspace.id)
    before = Delivery.objects.count()
    assert before == 2 * 21

    # Every arrival is busy again: another refresh, and nobody is new any more.
    apply(
        scored_acme,
        *[
            track(f"u{index:03}", "Export", times=2, account=f"arrival{index:03}")
            for index in range(ARRIVALS)
        ],
    )
    workspace_refresh(workspace_id=scored_acme.workspace.id)
    assert Delivery.objects.count() == before


def test_the_digest_is_sent_signed_as_a_webhook_and_in_words_to_slack(
    scored_acme, new_account_hooks, receiver, settings
):
    settings.PUBLIC_URL = "http://testserver.example"
    webhook, slack = new_account_hooks
    _arrive(scored_acme)
    workspace_refresh(workspace_id=scored_acme.workspace.id)

    (webhook_digest,) = _singles_and_digests(webhook)[1]
    assert delivery_attempt(delivery_id=webhook_digest.id) is None
    (sent,) = receiver.requests
    assert sent.headers["webhook-id"] == webhook_digest.id
    body = Webhook(webhook.secret).verify(sent.body, sent.headers)
    assert body["type"] == "account.digest" and body["data"]["count"] == 280

    (slack_digest,) = _singles_and_digests(slack)[1]
    assert delivery_attempt(delivery_id=slack_digest.id) is None
    message = json.loads(receiver.requests[1].body)
    link = _automation_page(slack)
    assert message["text"] == f"and 280 more accounts (New accounts to Slack): {link}"
    assert "webhook-signature" not in receiver.requests[1].headers  # Slack is not signed
    button = message["blocks"][1]["elements"][0]
    assert button["url"] == link
    for delivery in (webhook_digest, slack_digest):
        delivery.refresh_from_db()
        assert delivery.status == "delivered" and delivery.attempts == 1


def test_switching_off_cancels_the_digest_with_the_rest(scored_acme, new_account_hooks):
    webhook, _ = new_account_hooks
    _arrive(scored_acme, count=25)
    workspace_refresh(workspace_id=scored_acme.workspace.id)

    assert automation_switch_off(automation=webhook, reason="Too many.") == 21
    singles, (digest,) = _singles_and_digests(webhook)
    digest.refresh_from_db()
    assert digest.status == "cancelled" and digest.payload["data"]["count"] == 5
    assert {d.status for d in singles} == {"cancelled"}


def test_at_the_limit_no_digest_and_the_limit_is_a_setting(
    scored_acme, new_account_hooks, settings
):
    webhook, _ = new_account_hooks
    _arrive(scored_acme, count=20)
    workspace_refresh(workspace_id=scored_acme.workspace.id)
    assert [len(group) for group in _singles_and_digests(webhook)] == [20, 0]

    settings.AUTOMATION_MAX_PER_REFRESH = 3
    apply(scored_acme, group("zed", "late-comer-a"), group("yan", "late-comer-b"))
    apply(scored_acme, *[group(f"x{n}", f"late-comer-{n}") for n in range(3)])
    workspace_refresh(workspace_id=scored_acme.workspace.id)
    singles, digests = _singles_and_digests(webhook)
    assert len(singles) == 23
    assert [d.payload["data"]["count"] for d in digests] == [2]


def test_a_digest_links_to_the_segment_or_band_it_counts(scored_acme, receiver, settings):
    settings.PUBLIC_URL = "http://testserver.example"
    settings.AUTOMATION_MAX_PER_REFRESH = 1
    workspace = scored_acme.workspace
    busy = Segment.objects.create(
        workspace=workspace,
        name="Arrivals",
        target="accounts",
        conditions=[{"field": "trait:cohort", "operator": "equals", "value": "arrivals"}],
    )
    workspace_refresh(workspace_id=workspace.id)
    in_segment = automation_create(
        workspace=workspace, trigger="segment_entered", segment=busy, url=receiver.url
    )
    any_change = automation_create(
        workspace=workspace, trigger="score_changed", threshold=1, url=receiver.url
    )
    new_users = automation_create(
        workspace=workspace, trigger="new_user", url=receiver.url, destination="slack"
    )
    _arrive(scored_acme, count=5)
    workspace_refresh(workspace_id=workspace.id)

    accounts = reverse("dashboard:accounts", kwargs={"workspace_id": workspace.id})
    (digest,) = _singles_and_digests(in_segment)[1]
    assert digest.payload["data"]["subjects_url"] == (
        f"http://testserver.example{accounts}?segment={busy.id}"
    )
    assert digest.payload["data"]["count"] == 4
    (digest,) = _singles_and_digests(any_change)[1]
    assert digest.payload["data"]["subjects_url"] == _automation_page(any_change)
    singles, (digest,) = _singles_and_digests(new_users)
    assert {d.event_type for d in singles} == {"user.created"} and len(singles) == 1
    assert digest.event_type == "user.digest" and digest.payload["data"]["count"] == 4
    assert delivery_attempt(delivery_id=digest.id) is None
    message = json.loads(receiver.requests[-1].body)
    assert message["text"] == (
        f"and 4 more users ({new_users.name}): {_automation_page(new_users)}"
    )


# --- The doors a bulk arrival comes through ------------------------------------------------


@pytest.fixture
def fake_marketplace(settings):
    """Vera's marketplace over real HTTP: 300 licenses, whose cloud sites become accounts."""
    fake = FakeMarketplace(licenses=ARRIVALS, apps=1, email=EMAIL, token=TOKEN, vendor_id=VENDOR_ID)
    settings.MARKETPLACE_API_URL = fake.start()
    yield fake
    fake.stop()


def test_a_marketplace_first_sync_goes_through_the_limit(
    scored_acme, new_account_hooks, fake_marketplace
):
    connection = marketplace_services.connection_configure(
        product_id=scored_acme.product.id,
        email=EMAIL,
        api_token=TOKEN,
        vendor_id=VENDOR_ID,
        developer_id=fake_marketplace.developer_id,
        marketplace_product_id=fake_marketplace.product_id,
        app_name=fake_marketplace.apps[0]["appName"],
    )
    run = run_until_done(SyncRun.objects.get(connection=connection).id)
    assert run.outcome == "succeeded", run.error
    assert run.accounts_created > 20
    workspace_refresh(workspace_id=scored_acme.workspace.id)

    for automation in new_account_hooks:
        singles, (digest,) = _singles_and_digests(automation)
        assert len(singles) == 20
        assert digest.payload["data"]["count"] == run.accounts_created - 20


def test_a_v1_import_of_historical_data_goes_through_the_limit(
    scored_acme, new_account_hooks, receiver, post_json, drain
):
    """300 accounts' past month, imported in one request (a backfill from another tool)."""
    changed = automation_create(
        workspace=scored_acme.workspace, trigger="score_changed", threshold=10, url=receiver.url
    )
    month_ago = iso_now(offset_seconds=-30 * 86400)
    batch = []
    for index in range(ARRIVALS):
        user, account = f"imported{index:03}", f"arrival{index:03}"
        batch.append({"type": "group", "userId": user, "groupId": account, "timestamp": month_ago})
        for day in range(index % 5 + 1):
            batch.append(
                {
                    "type": "track",
                    "userId": user,
                    "event": "Report",
                    "context": {"groupId": account},
                    "timestamp": iso_now(offset_seconds=-(day * 3 + 1) * 86400),
                }
            )
    response = post_json(
        "/v1/import", {"batch": batch, "sentAt": iso_now()}, auth=segment_auth(scored_acme.key.key)
    )
    assert response.status_code == 200, response.content
    drain()
    workspace_refresh(workspace_id=scored_acme.workspace.id)

    for automation in new_account_hooks:
        singles, (digest,) = _singles_and_digests(automation)
        assert len(singles) == 20
        assert digest.payload["data"]["count"] == ARRIVALS - 20
    # Their scores rose from nothing: those by 10 or more fired score_changed, 20 by name.
    fired = AutomationFiring.objects.filter(automation=changed).count()
    assert fired > 20
    singles, (digest,) = _singles_and_digests(changed)
    assert len(singles) == 20 and digest.payload["data"]["count"] == fired - 20


def test_a_member_following_a_digest_finds_the_list_and_the_delivery(
    scored_acme, receiver, settings, django_user_model
):
    settings.PUBLIC_URL = "http://testserver.example"
    settings.AUTOMATION_MAX_PER_REFRESH = 2
    workspace = scored_acme.workspace
    arrivals = Segment.objects.create(
        workspace=workspace,
        name="Arrivals",
        target="accounts",
        conditions=[{"field": "trait:cohort", "operator": "equals", "value": "arrivals"}],
    )
    workspace_refresh(workspace_id=workspace.id)
    automation = automation_create(
        workspace=workspace, trigger="segment_entered", segment=arrivals, url=receiver.url
    )
    _arrive(scored_acme, count=5)
    workspace_refresh(workspace_id=workspace.id)
    (digest,) = _singles_and_digests(automation)[1]
    member = django_user_model.objects.create_user("vic", password="pw-vic-12345")
    ProductMembership.objects.create(
        user=member, product=scored_acme.product, role=ProductMembership.Role.VIEWER
    )
    client = Client()
    client.force_login(member)

    listed = client.get(digest.payload["data"]["subjects_url"].removeprefix(settings.PUBLIC_URL))
    assert listed.status_code == 200
    page = listed.content.decode()
    assert all(f"arrival{index:03}" in page for index in range(5))
    assert "initech" not in page
    shown = client.get(_automation_page(automation).removeprefix(settings.PUBLIC_URL))
    assert shown.status_code == 200 and "account.digest" in shown.content.decode()
    delivery_page = reverse(
        "automations:delivery",
        kwargs={
            "workspace_id": workspace.id,
            "automation_id": automation.id,
            "delivery_id": digest.id,
        },
    )
    opened = client.get(delivery_page)
    assert opened.status_code == 200 and "account.digest" in opened.content.decode()
