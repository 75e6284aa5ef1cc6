"""`make run` prints a demo key, token and curl lines that work as printed."""

import re
import shlex
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from engagement.models import AccountScore, Workspace
from engagement.scoring import workspace_rescore
from ingestion.models import AcceptedRequest
from ingestion.services.drain import accepted_requests_drain
from readapi.models import ApiToken


def run_demo() -> str:
    out = StringIO()
    call_command("demo_credentials", "--base-url", "http://testserver", stdout=out)
    return out.getvalue()


def test_the_printed_curl_lines_are_accepted_and_give_the_account_a_score(db, client):
    printed = run_demo()

    curls = [line for line in printed.splitlines() if line.startswith("curl -i -X POST")]
    assert [shlex.split(curl)[4].rsplit("/", 1)[1] for curl in curls] == ["identify", "track"]
    for curl in curls:
        argv = shlex.split(curl)
        headers = dict(argv[i + 1].split(": ", 1) for i, arg in enumerate(argv) if arg == "-H")
        response = client.post(
            argv[argv.index("POST") + 1].removeprefix("http://testserver"),
            argv[argv.index("-d") + 1],
            content_type=headers["Content-Type"],
            HTTP_AUTHORIZATION=headers["Authorization"],
        )
        assert response.status_code == 202
    assert AcceptedRequest.objects.count() == 2
    accepted_requests_drain(limit=100)
    workspace = Workspace.objects.get(product__name="Demo product")
    workspace_rescore(workspace_id=workspace.id)
    account = AccountScore.objects.get(workspace=workspace, account__tracking_id="acme")
    assert (account.engagement_score, account.total_users, account.active_users) == (100, 1, 1)


@pytest.fixture(autouse=True)
def demo_data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    return tmp_path


def printed_token(printed: str) -> str:
    return re.search(r"API token:\s+(eds_\S+)", printed).group(1)


def test_a_restart_prints_the_same_token_and_it_still_reads(db, client, demo_data_dir):
    first = printed_token(run_demo())
    second = printed_token(run_demo())

    assert first == second
    assert ApiToken.objects.filter(name="demo (make run)", revoked_at__isnull=True).count() == 1
    assert (demo_data_dir / "demo-api-token").stat().st_mode & 0o077 == 0
    workspace = Workspace.objects.get(product__name="Demo product")
    response = client.get(
        f"/v2/accounts?workspace_id={workspace.id}", HTTP_AUTHORIZATION=f"Bearer {first}"
    )
    assert response.status_code == 200


def test_a_revoked_remembered_token_is_replaced(db, client):
    first = printed_token(run_demo())
    ApiToken.objects.filter(name="demo (make run)").update(revoked_at=timezone.now())

    second = printed_token(run_demo())

    assert second != first
    assert ApiToken.objects.filter(name="demo (make run)", revoked_at__isnull=True).count() == 1


def test_new_token_revokes_the_previous_one(db):
    first = printed_token(run_demo())
    out = StringIO()
    call_command("demo_credentials", "--base-url", "http://testserver", "--new-token", stdout=out)
    second = printed_token(out.getvalue())

    assert first != second
    demo_tokens = ApiToken.objects.filter(name="demo (make run)")
    assert demo_tokens.count() == 2
    assert list(demo_tokens.filter(revoked_at__isnull=True)) == [
        ApiToken.objects.get(prefix=second[:10])
    ]
