"""Named actors of the dashboard tests: Acme's accounts scored, people with memberships."""

from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from engagement.models import Account, ProductMembership, Segment, User
from engagement.scoring import workspace_rescore
from engagement.segments import segment_refresh
from tests.engagement.helpers import apply, group, identify, track

PASSWORD = "a-Long-passw0rd!x"  # noqa: S105 (a test password)


@dataclass
class Scored:
    """Acme with three accounts: Initech (busy), Umbrella (quiet) and Hooli (one user, idle)."""

    initech: Account
    umbrella: Account
    hooli: Account
    ann: User
    bob: User
    enterprise: Segment


@pytest.fixture
def scored(acme) -> Scored:
    apply(
        acme,
        identify("ann", {"email": "ann@initech.example", "firstName": "Ann", "lastName": "Lee"}),
        identify("bob", {"email": "bob@umbrella.example"}),
        identify("cy", {"email": "cy@hooli.example"}),
        group(
            "ann",
            "initech",
            {
                "name": "Initech",
                "domain": "initech.example",
                "plan": "enterprise",
                "am.licenseType": "COMMERCIAL",
                "am.status": "active",
            },
        ),
        group("bob", "umbrella", {"name": "Umbrella Corp", "domain": "umbrella.example"}),
        group("cy", "hooli", {"name": "Hooli", "domain": "hooli.example", "plan": "free"}),
        track("ann", "Report_Created", times=12, account="initech"),
        track("ann", "Dashboard_Viewed", days_ago=2, times=5, account="initech"),
        track("bob", "Dashboard_Viewed", days_ago=3, account="umbrella"),
    )
    segment = Segment.objects.create(
        workspace=acme.workspace,
        name="Enterprise",
        conditions=[{"field": "trait:plan", "operator": "equals", "value": "enterprise"}],
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    segment_refresh(segment=segment)
    accounts = {a.tracking_id: a for a in Account.objects.filter(product=acme.product)}
    users = {u.tracking_id: u for u in User.objects.filter(product=acme.product)}
    return Scored(
        initech=accounts["initech"],
        umbrella=accounts["umbrella"],
        hooli=accounts["hooli"],
        ann=users["ann"],
        bob=users["bob"],
        enterprise=segment,
    )


def _person(username: str, **extra):
    return get_user_model().objects.create_user(
        username, f"{username}@example.com", PASSWORD, **extra
    )


@pytest.fixture
def vera(acme):
    """A viewer of Acme (not staff: the dashboard needs no admin access)."""
    person = _person("vera")
    ProductMembership.objects.create(user=person, product=acme.product)
    return person


@pytest.fixture
def gus(globex):
    """A viewer of Globex only."""
    person = _person("gus")
    ProductMembership.objects.create(user=person, product=globex.product)
    return person


def signed_in(person) -> Client:
    client = Client()
    client.force_login(person)
    return client
