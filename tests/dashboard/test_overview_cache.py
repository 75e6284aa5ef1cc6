"""The overview's figures are cached (engagement/workspace_cache.py), by the read API's rule:
a score refresh or a change of the workspace's settings starts afresh, no waiting for expiry."""

from engagement.scoring import workspace_refresh
from tests.dashboard.conftest import signed_in
from tests.engagement.helpers import apply, track


def overview(client, workspace):
    return client.get(f"/w/{workspace.id}/").context["summary"]


def test_a_score_refresh_shows_on_the_overview_at_once(acme, vera, scored):
    client = signed_in(vera)
    assert overview(client, acme.workspace).active_users == 2  # now cached

    # Hooli's idle user turns active.
    apply(acme, track("cy", "Dashboard_Viewed", times=2, account="hooli"))
    assert overview(client, acme.workspace).active_users == 2  # not refreshed yet: cached
    workspace_refresh(workspace_id=acme.workspace.id)

    assert overview(client, acme.workspace).active_users == 3


def test_a_settings_change_shows_on_the_overview_at_once(acme, vera, scored):
    client = signed_in(vera)
    assert overview(client, acme.workspace).window_days == acme.workspace.lookback_days

    acme.workspace.lookback_days = 7
    acme.workspace.save()

    assert overview(client, acme.workspace).window_days == 7
