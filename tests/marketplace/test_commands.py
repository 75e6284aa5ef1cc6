"""Operator commands: connect without the token on the command line, sync now, disconnect."""

import io

import pytest
from django.core.management import CommandError, call_command

from marketplace import services
from marketplace.models import MarketplaceConnection, SyncRun
from tests.marketplace.conftest import EMAIL, TOKEN, VENDOR_ID, connect, mock_vendor

State = MarketplaceConnection.State


class Pipe(io.StringIO):
    """Standard input that is not a terminal (as in `printenv T | manage.py ...`)."""

    def isatty(self) -> bool:
        return False


def connect_command(acme, **kwargs):
    call_command(
        "marketplace_connect",
        "--product", str(acme.product.id), "--email", EMAIL, "--vendor-id", VENDOR_ID,
        "--app-key", "com.example.timesheets", **kwargs,
    )  # fmt: skip


def test_connect_reads_the_token_from_standard_input(acme, mocked, monkeypatch, capsys):
    monkeypatch.delenv("MARKETPLACE_API_TOKEN", raising=False)
    mock_vendor(mocked)
    connect_command(acme, stdin=Pipe(TOKEN + "\n"))
    connection = MarketplaceConnection.objects.get(product=acme.product)
    assert connection.api_token == TOKEN and connection.state == State.ACTIVE
    assert TOKEN not in capsys.readouterr().out
    sent = mocked.calls[0].request.headers["Authorization"]
    assert sent.startswith("Basic ")


def test_connect_reads_the_token_from_the_environment(acme, mocked, monkeypatch):
    monkeypatch.setenv("MARKETPLACE_API_TOKEN", "from-the-env")
    mock_vendor(mocked)
    connect_command(acme, stdin=Pipe("not this\n"))
    assert MarketplaceConnection.objects.get(product=acme.product).api_token == "from-the-env"


def test_connect_without_any_token_says_where_to_put_it(acme, mocked, monkeypatch):
    monkeypatch.delenv("MARKETPLACE_API_TOKEN", raising=False)
    with pytest.raises(CommandError, match="MARKETPLACE_API_TOKEN"):
        connect_command(acme, stdin=Pipe(""))
    assert len(mocked.calls) == 0


def test_sync_command_starts_a_full_sync_now_and_refuses_a_second(acme, capsys):
    connection = connect(acme)
    SyncRun.objects.filter(connection=connection).update(outcome="succeeded")
    call_command("marketplace_sync", "--product", str(acme.product.id))
    run = SyncRun.objects.filter(connection=connection).first()
    assert (run.trigger, run.mode, run.outcome) == ("manual", "full", "running")
    assert f"Run {run.id}" in capsys.readouterr().out
    with pytest.raises(CommandError, match="already running"):
        call_command("marketplace_sync", "--product", str(acme.product.id))


def test_disconnect_command_disconnects_as_the_admin_action_does(acme, capsys):
    connection = connect(acme)
    call_command("marketplace_disconnect", "--product", str(acme.product.id))
    connection.refresh_from_db()
    assert connection.state == State.DISCONNECTED and not connection.api_token
    assert SyncRun.objects.get(connection=connection).outcome == "stopped"
    assert not services.connection_sync_request(
        connection_id=connection.id, trigger="manual"
    ).started
    with pytest.raises(CommandError, match="is not active"):
        call_command("marketplace_sync", "--product", str(acme.product.id))


def test_commands_refuse_a_product_without_a_connection(acme):
    for command in ("marketplace_sync", "marketplace_disconnect"):
        with pytest.raises(CommandError, match="no marketplace connection"):
            call_command(command, "--product", str(acme.product.id))


@pytest.mark.parametrize("command", ["marketplace_sync", "marketplace_disconnect"])
def test_commands_have_help(command, capsys):
    with pytest.raises(SystemExit):
        call_command(command, "--help")
    assert "--product" in capsys.readouterr().out
