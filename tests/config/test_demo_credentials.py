"""`make run` prints a demo key, token and curl lines that work as printed."""

import re
import shlex
from io import StringIO

from django.core.management import call_command

from engagement.models import AccountScore, Workspace
from engagement.scoring import workspace_rescore
from ingestion.models import AcceptedRequest
from ingestion.services import accepted_requests_drain
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


def test_each_run_issues_a_fresh_token_and_revokes_the_previous_one(db):
    first = re.search(r"API token:\s+(eds_\S+)", run_demo()).group(1)
    second = re.search(r"API token:\s+(eds_\S+)", run_demo()).group(1)

    assert first != second
    demo_tokens = ApiToken.objects.filter(name="demo (make run)")
    assert demo_tokens.count() == 2
    assert demo_tokens.filter(revoked_at__isnull=True).count() == 1
