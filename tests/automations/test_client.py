"""The delivery client refuses targets on the service's own network, at save and at send."""

import pytest
from django.core.exceptions import ValidationError

from automations.client import DeliveryTimeout, UnsafeTarget, post_json, target_check
from automations.services import automation_create
from automations.slack import FLAME, SNOWFLAKE, slack_message


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:8000/hook",  # a name that resolves to 127.0.0.1
        "http://127.0.0.1/hook",
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://0.0.0.0/hook",
        "http://100.64.0.1/hook",
        "http://[::ffff:192.168.0.1]/hook",
        "ftp://example.com/hook",
        "http://user:pass@example.com/hook",
    ],
)
def test_private_and_odd_targets_are_refused(url, settings):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = False
    with pytest.raises(UnsafeTarget):
        target_check(url)


def test_a_refused_target_is_refused_again_at_send_time(receiver, settings):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = False
    with pytest.raises(UnsafeTarget, match="127.0.0.1"):
        post_json(receiver.url, b"{}", {})
    assert receiver.requests == []


def test_saving_an_automation_with_a_private_target_is_refused(acme, settings):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = False
    with pytest.raises(ValidationError) as refused:
        automation_create(
            workspace=acme.workspace, trigger="new_account", url="http://localhost:9/x"
        )
    assert "AUTOMATION_ALLOW_PRIVATE_URLS" in refused.value.message_dict["url"][0]


def test_redirects_are_not_followed(receiver):
    receiver.statuses = [302]
    response = post_json(receiver.url, b"{}", {})
    assert response.status_code == 302 and not response.ok
    assert len(receiver.requests) == 1


def test_a_slow_receiver_times_out(receiver):
    receiver.delay = 1.0
    with pytest.raises(DeliveryTimeout):
        post_json(receiver.url, b"{}", {}, timeout=0.3)


def test_the_slack_message_shows_the_direction_of_the_change():
    up = slack_message(
        event_type="account.score_changed",
        subject={"name": "Initech", "engagement_score": 80, "score_change": 12},
        what="score changed by +12 points",
        dashboard_url="http://eds.example.com/dashboard/w/1/accounts/7/",
    )
    down = slack_message(
        event_type="account.score_changed",
        subject={"name": "Hooli", "engagement_score": 20, "score_change": -15},
        what="score changed by -15 points",
        dashboard_url="http://eds.example.com/dashboard/w/1/accounts/8/",
    )
    assert FLAME in up["text"] and SNOWFLAKE in down["text"]
    assert "Initech" in up["text"]
    assert up["blocks"][2]["elements"][0]["url"].endswith("/accounts/7/")
