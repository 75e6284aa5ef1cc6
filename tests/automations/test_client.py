"""The delivery client refuses targets on the service's own network, at save and at send."""

import socket

import pytest
from django.core.exceptions import ValidationError

from automations.client import DeliveryTimeout, UnsafeTarget, post_json, target_check
from automations.services import automation_create
from automations.slack import FLAME, SNOWFLAKE, slack_message
from tests.automations.redirector import Redirector

# Refused whatever AUTOMATION_ALLOW_PRIVATE_URLS says: not globally reachable and not a network
# of one's own, cloud metadata in every spelling, and URLs that are no usable target.
ALWAYS_REFUSED = [
    "http://192.0.0.192/",  # IETF protocol assignments, 192.0.0.0/24
    "http://192.0.0.8/",
    "http://198.18.0.1/",  # benchmarking
    "http://198.19.255.254/",
    "http://192.0.2.10/",  # documentation
    "http://198.51.100.7/",
    "http://203.0.113.9/",
    "http://[2001:db8::1]/",
    "http://224.0.0.1/",  # multicast
    "http://[ff02::1]/",
    "http://240.0.0.1/",  # reserved
    "http://255.255.255.255/",
    "http://[fec0::1]/",
    "http://0.0.0.0/",  # unspecified
    "http://0/",
    "http://[::]/",
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",  # Teredo
    "http://169.254.169.254/latest/meta-data",  # metadata, in every spelling
    "http://2852039166/",
    "http://0xa9.0xfe.0xa9.0xfe/",
    "http://0251.0376.0251.0376/",
    "http://169.254.43518/",
    "http://[::ffff:169.254.169.254]/",
    "http://[2002:a9fe:a9fe::]/",  # 6to4
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64
    "http://[64:ff9b:1:a9fe:a9:fe00::]/",  # local-use NAT64, a /48 translator
    "http://[64:ff9b:1::a9fe:a9fe]/",  # local-use NAT64, a /96 translator
    "http://[fd00:ec2::254]/",
    "http://256.1.1.1/",  # ends in a number but is no address
    "http://1.2.3.4.5/",
    "http://08.0.0.1/",
    "ftp://example.com/hook",
    "http://user:pass@example.com/hook",
]
# Refused unless AUTOMATION_ALLOW_PRIVATE_URLS=true: a network of one's own, however written.
PRIVATE = [
    "http://localhost:8000/hook",  # a name that resolves to 127.0.0.1
    "http://127.0.0.1/hook",
    "http://127.0.0.1./hook",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://0x7f000001/",
    "http://017700000001/",
    "http://0177.0.0.01/",
    "http://127.1/",
    "http://10.0.0.1/hook",
    "http://10.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/hook",  # shared
    "http://169.254.1.1/",  # link-local
    "http://[::1]/hook",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://[::ffff:192.168.0.1]/hook",
    "http://[::ffff:127.0.0.1]:8202/",
    "http://[2002:7f00:1::]:8202/",  # 6to4 for 127.0.0.1
    "http://[64:ff9b::7f00:1]/",  # NAT64 for 127.0.0.1
    "http://[64:ff9b:1::a00:1]/",
]
# Globally reachable, in the same spellings: allowed (checked only, never contacted here).
PUBLIC = [
    "http://93.184.215.14/",
    "http://1572394766/",
    "http://[2606:4700:4700::1111]/",
    "http://[::ffff:93.184.215.14]/",
    "http://[2002:5db8:d70e::]/",
    "http://[64:ff9b::5db8:d70e]/",
]


def _refusals(url: str) -> tuple[str, str]:
    """The refusal at save time and at send time: the same rule must give the same words."""
    with pytest.raises(UnsafeTarget) as saved:
        target_check(url)
    with pytest.raises(UnsafeTarget) as sent:
        post_json(url, b"{}", {})
    return saved.value.message, sent.value.message


@pytest.mark.parametrize("allow_private", [False, True])
@pytest.mark.parametrize("url", ALWAYS_REFUSED)
def test_what_is_never_reached_is_refused_at_save_and_at_send(url, allow_private, settings):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = allow_private
    at_save, at_send = _refusals(url)
    assert at_save == at_send
    assert "AUTOMATION_ALLOW_PRIVATE_URLS" not in at_save  # the setting would not help


@pytest.mark.parametrize("url", PRIVATE)
def test_private_addresses_are_refused_at_save_and_at_send(url, settings):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = False
    at_save, at_send = _refusals(url)
    assert at_save == at_send
    assert "AUTOMATION_ALLOW_PRIVATE_URLS" in at_save


@pytest.mark.parametrize("url", PRIVATE)
def test_the_setting_opens_private_addresses(url, settings):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = True
    target_check(url)


@pytest.mark.parametrize("allow_private", [False, True])
@pytest.mark.parametrize("url", PUBLIC)
def test_public_addresses_pass(url, allow_private, settings):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = allow_private
    target_check(url)


def test_a_name_that_resolves_to_the_metadata_address_is_refused_even_when_allowed(
    settings, monkeypatch
):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = True
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):
        if host == "metadata.example.com":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    at_save, at_send = _refusals("http://metadata.example.com/latest/meta-data")
    assert at_save == at_send
    assert "metadata" in at_save


def test_a_refused_target_is_refused_again_at_send_time(receiver, settings):
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = False
    with pytest.raises(UnsafeTarget, match="127.0.0.1"):
        post_json(receiver.url, b"{}", {})
    assert receiver.requests == []


@pytest.mark.parametrize(
    "host", ["2130706433", "0x7f.1", "127.1", "017700000001", "[::ffff:7f00:1]"]
)
def test_any_spelling_of_the_receivers_address_is_that_address(receiver, settings, host):
    port = receiver.server.server_address[1]
    url = f"http://{host}:{port}/hooks/eds"
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = False
    with pytest.raises(UnsafeTarget, match="127.0.0.1"):
        post_json(url, b"{}", {})
    assert receiver.requests == []
    settings.AUTOMATION_ALLOW_PRIVATE_URLS = True
    assert post_json(url, b"{}", {}).ok
    assert len(receiver.requests) == 1


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


def test_a_307_to_another_server_is_returned_and_its_location_never_contacted(receiver):
    redirector = Redirector(location=receiver.url).start()
    try:
        response = post_json(f"{redirector.base_url}/hooks/eds", b'{"a": 1}', {})
    finally:
        redirector.stop()
    assert response.status_code == 307 and not response.ok
    assert redirector.paths == ["/hooks/eds"]
    assert receiver.requests == []


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
