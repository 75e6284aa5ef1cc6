"""Helpers for the read API tests: accounts, users and their precomputed score rows."""

from datetime import datetime, timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from engagement.models import (
    Account,
    AccountScore,
    Membership,
    Segment,
    SegmentMember,
    User,
    UserScore,
    Workspace,
)
from tests.conftest import Tenant


@pytest.fixture(autouse=True)
def fresh_throttle_counts():
    """Throttle counts live in the cache; every test starts with none."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def read(api_client, db):
    """GET as a tenant: read(tenant, "/v2/...", **params)."""

    def get(tenant: Tenant | None, path: str, **params):
        headers = {"HTTP_AUTHORIZATION": tenant.bearer} if tenant else {}
        return api_client.get(path, params, **headers)

    return get


def add_account(tenant: Tenant, tracking_id: str, **traits) -> Account:
    return Account.objects.create(
        product=tenant.product, tracking_id=tracking_id, identified=True, traits=traits
    )


def add_user(tenant: Tenant, tracking_id: str, email: str = "", **traits) -> User:
    if email:
        traits["email"] = email
    return User.objects.create(
        product=tenant.product,
        tracking_id=tracking_id,
        identified=True,
        email=email,
        traits=traits,
        first_seen_at=timezone.now() - timedelta(days=3),
    )


def link(user: User, account: Account) -> Membership:
    return Membership.objects.create(user=user, account=account, linked_at=timezone.now())


def score_account(workspace: Workspace, account: Account, score: int, **fields) -> AccountScore:
    fields.setdefault("raw_score", float(score) / 2)
    return AccountScore.objects.create(
        workspace=workspace, account=account, engagement_score=score, **fields
    )


def score_user(workspace: Workspace, user: User, score: int, **fields) -> UserScore:
    fields.setdefault("raw_score", float(score) / 2)
    return UserScore.objects.create(
        workspace=workspace, user=user, engagement_score=score, **fields
    )


def scored_peers(tenant: Tenant, kind: str, scores: list[int]) -> None:
    """Other users (`kind` "user") or accounts of the workspace scoring `scores`, which the
    percentile ranks of the rest are read against."""
    for number, score in enumerate(scores):
        if kind == "user":
            score_user(tenant.workspace, add_user(tenant, f"peer_{number}"), score)
        else:
            score_account(tenant.workspace, add_account(tenant, f"peer_{number}"), score)


def add_segment(workspace: Workspace, name: str, target: str = "accounts") -> Segment:
    return Segment.objects.create(
        workspace=workspace,
        name=name,
        target=target,
        conditions=[{"field": "metric:engagement_score", "operator": "greater_than", "value": 5}],
    )


def join(segment: Segment, *, joined_at: datetime, account=None, user=None) -> SegmentMember:
    return SegmentMember.objects.create(
        segment=segment, account=account, user=user, joined_at=joined_at
    )
