"""The score sync sends changed subjects' scores as traits through a Segment-compatible API."""

import json
from datetime import timedelta

import pytest
import responses
from django.core.exceptions import ValidationError
from django.utils import timezone

from automations.models import TraitSync
from automations.trait_sync import trait_sync_create, trait_sync_run, trait_syncs_due
from engagement.models import Account, User
from engagement.scoring import workspace_refresh
from tests.engagement.helpers import apply, group, track

HOST = "http://127.0.0.1:9"


@pytest.fixture
def scored_acme(acme, settings):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = True
    apply(acme, group("ann", "initech"), track("ann", "Report", times=20, account="initech"))
    workspace_refresh(workspace_id=acme.workspace.id)
    return acme


def _sent(calls) -> list[dict]:
    return [m for call in calls for m in json.loads(call.request.body)["batch"]]


@pytest.mark.both_databases
@responses.activate
def test_users_and_accounts_are_sent_once_then_only_when_they_change(scored_acme):
    responses.post(f"{HOST}/v1/batch", json={"success": True})
    sync = trait_sync_create(workspace=scored_acme.workspace, host=HOST, write_key="wk")
    run = trait_sync_run(sync_id=sync.id)
    assert (run.status, run.users_sent, run.accounts_sent) == ("ok", 1, 1)
    messages = _sent(responses.calls)
    identify = next(m for m in messages if m["type"] == "identify")
    assert identify["userId"] == "ann"
    assert identify["traits"]["eds_engagement_score"] == 100
    group_call = next(m for m in messages if m["type"] == "group")
    assert group_call["groupId"] == "initech" and "eds_score_change" in group_call["traits"]
    assert responses.calls[0].request.headers["Authorization"].startswith("Basic ")
    # Nothing changed: nothing sent.
    again = trait_sync_run(sync_id=sync.id)
    assert (again.users_sent, again.accounts_sent) == (0, 0)
    apply(scored_acme, group("bob", "hooli"), track("bob", "Report", account="hooli"))
    workspace_refresh(workspace_id=scored_acme.workspace.id)
    third = trait_sync_run(sync_id=sync.id)
    assert third.users_sent >= 1 and third.accounts_sent >= 1


@pytest.mark.both_databases
@responses.activate
def test_a_failed_run_keeps_the_watermark_so_the_next_resends(scored_acme):
    responses.post(f"{HOST}/v1/batch", status=400, json={"error": "bad"})
    sync = trait_sync_create(workspace=scored_acme.workspace, host=HOST, write_key="wk")
    run = trait_sync_run(sync_id=sync.id)
    assert run.status == "failed" and run.error
    sync.refresh_from_db()
    assert sync.synced_through is None and sync.last_error
    responses.replace(responses.POST, f"{HOST}/v1/batch", json={"success": True})
    assert trait_sync_run(sync_id=sync.id).users_sent == 1


@pytest.mark.both_databases
def test_bad_settings_and_private_hosts_are_refused(acme, settings):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = False
    with pytest.raises(ValidationError) as refused:
        trait_sync_create(workspace=acme.workspace, host="http://localhost:8000", write_key="")
    assert set(refused.value.message_dict) == {"host", "write_key"}
    assert TraitSync.objects.count() == 0


@pytest.mark.both_databases
def test_a_sync_is_due_after_its_interval(scored_acme):
    sync = trait_sync_create(workspace=scored_acme.workspace, host=HOST, write_key="wk")
    assert trait_syncs_due() == [sync.id]
    sync.runs.create(started_at=timezone.now(), status="ok")
    assert trait_syncs_due() == []
    assert trait_syncs_due(now=timezone.now() + timedelta(minutes=61)) == [sync.id]


@pytest.mark.django_db(transaction=True)
def test_the_scores_arrive_at_this_service_under_a_second_product(live_door, settings, drain):
    from tests.conftest import make_tenant

    settings.AUTOMATION_ALLOW_PRIVATE_URLS = True
    acme, globex = make_tenant("Acme"), make_tenant("Globex")
    apply(acme, group("ann", "initech"), track("ann", "Report", times=20, account="initech"))
    workspace_refresh(workspace_id=acme.workspace.id)
    sync = trait_sync_create(workspace=acme.workspace, host=live_door.url, write_key=globex.key.key)
    run = trait_sync_run(sync_id=sync.id)
    assert run.status == "ok", run.error
    drain()
    ann = User.objects.get(product=globex.product, tracking_id="ann")
    assert ann.traits["eds_engagement_score"] == 100
    initech = Account.objects.get(product=globex.product, tracking_id="initech")
    # Initech scores 100, up 100, and was seen today: three of the built-in segments.
    assert initech.traits["eds_segments"] == ["Active Today", "Red Hot", "Score 75 and over"]
    assert "eds_score_change" in initech.traits
