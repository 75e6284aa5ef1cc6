"""An automation triggers on the built-in segment "Renewal at risk" like on any segment: an
account whose license comes within 60 days of its renewal while it scores low enters it, and the
automation's webhook is delivered for it; its conditions' group holds in automations too."""

from datetime import UTC, datetime, timedelta

import pytest

from automations.models import Delivery
from automations.services import automation_create
from engagement.builtin_segments import RENEWAL_AT_RISK
from engagement.models import AccountScore, Segment
from engagement.scoring import workspace_refresh
from tests.engagement.helpers import apply, group, track

pytestmark = pytest.mark.both_databases


def ahead(days: int) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).date().isoformat()


def license_renewing_in(days: int) -> dict:
    return {
        "am.status": "active",
        "am.licenseType": "COMMERCIAL",
        "am.maintenanceEndDate": ahead(days),
        "am.mrr": 250,
    }


def _fired(automation) -> list[str]:
    return sorted(
        d.payload["data"][automation.subject_kind]["tracking_id"]
        for d in Delivery.objects.filter(automation=automation)
    )


def test_an_account_entering_renewal_at_risk_fires_its_automation(acme, receiver):
    # Initech busy, Hooli quiet; Hooli's license renews in 90 days: not yet at risk.
    apply(acme, group("ann", "initech"), track("ann", "Report", times=20, account="initech"))
    apply(
        acme,
        group("bob", "hooli", license_renewing_in(90)),
        track("bob", "Report", times=1, account="hooli"),
    )
    workspace_refresh(workspace_id=acme.workspace.id)
    segment = Segment.objects.get(workspace=acme.workspace, name=RENEWAL_AT_RISK, builtin=True)
    entered = automation_create(
        workspace=acme.workspace, trigger="segment_entered", segment=segment, url=receiver.url
    )
    # The same condition language in an automation's own conditions, a group included.
    renewing = automation_create(
        workspace=acme.workspace,
        trigger="segment_entered",
        segment=segment,
        url=receiver.url,
        conditions=[
            {
                "any": [
                    {"field": "trait:am.mrr", "operator": "greater_than", "value": 1000},
                    {
                        "field": "trait:am.maintenanceEndDate",
                        "operator": "within_next_days",
                        "value": 30,
                    },
                ]
            }
        ],
    )
    hooli = AccountScore.objects.get(workspace=acme.workspace, account__tracking_id="hooli")
    assert hooli.engagement_score < 50

    # The Marketplace sync moves Hooli's renewal to 25 days from now.
    apply(acme, group("bob", "hooli", license_renewing_in(25), days_ago=0))
    workspace_refresh(workspace_id=acme.workspace.id)
    assert _fired(entered) == ["hooli"]
    assert _fired(renewing) == ["hooli"]
    delivery = Delivery.objects.filter(automation=entered).get()
    assert delivery.event_type == "account.segment_entered"
    assert delivery.payload["data"]["trigger"]["segment"] == {
        "id": segment.id,
        "name": RENEWAL_AT_RISK,
    }
    assert RENEWAL_AT_RISK in delivery.payload["data"]["account"]["segments"]
