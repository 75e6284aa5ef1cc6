"""Two refreshes of one segment at once (PostgreSQL): members are added by a plain insert, and
when another session adds one of them first, the refresh still adds the rest, once each."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import transaction
from django.utils import timezone

from engagement.models import Segment, SegmentMember, SegmentMembershipChange
from engagement.scoring import workspace_rescore
from engagement.segments import segment_refresh
from tests.conftest import make_tenant
from tests.engagement.helpers import apply, group, held_in_another_session, track

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


@contextmanager
def member_added(segment: Segment, account_id: int) -> Iterator[None]:
    """The account added to the segment in a transaction, committed on leaving."""
    with transaction.atomic():
        SegmentMember.objects.create(
            segment=segment, account_id=account_id, joined_at=timezone.now()
        )
        yield


@pytest.mark.parametrize("among", [False, True], ids=["whole", "among ids"])
def test_a_member_another_refresh_added_first_is_skipped_and_the_rest_join(among):
    initech = make_tenant("Initech")
    apply(
        initech,
        *(group(f"u{n}", f"acct-{n}") for n in range(3)),
        *(track(f"u{n}", "Login") for n in range(3)),
    )
    workspace_rescore(workspace_id=initech.workspace.id)
    segment = Segment.objects.create(
        workspace=initech.workspace,
        name="everyone",
        target=Segment.Target.ACCOUNTS,
        conditions=[{"field": "metric:engagement_score", "operator": "is_set"}],
    )
    first = initech.product.accounts.get(tracking_id="acct-0")
    commit = threading.Event()
    thread = held_in_another_session(lambda: member_added(segment, first.id), commit)
    # The refresh's insert waits on the other session's row until it commits, then finds it.
    threading.Timer(0.5, commit.set).start()
    try:
        ids = list(initech.product.accounts.values_list("id", flat=True)) if among else None
        joined, left = segment_refresh(segment=segment, among=ids)
    finally:
        commit.set()
        thread.join(10)

    assert (joined, left) == (2, 0)
    members = SegmentMember.objects.filter(segment=segment)
    assert sorted(m.account.tracking_id for m in members) == ["acct-0", "acct-1", "acct-2"]
    logged = SegmentMembershipChange.objects.filter(segment=segment, change="joined")
    assert sorted(c.account.tracking_id for c in logged) == ["acct-1", "acct-2"]
