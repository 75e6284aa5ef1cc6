"""`make run` prints a demo key, token and curl lines that work as printed."""

import re
import shlex
from io import StringIO

from django.core.management import call_command

from ingestion.models import AcceptedRequest
from readapi.models import ApiToken


def run_demo() -> str:
    out = StringIO()
    call_command("demo_credentials", "--base-url", "http://testserver", stdout=out)
    return out.getvalue()


def test_the_printed_curl_line_posts_an_event_that_is_accepted(db, client):
    printed = run_demo()

    curl = next(line for line in printed.splitlines() if line.startswith("curl -i -X POST"))
    argv = shlex.split(curl)
    headers = dict(argv[i + 1].split(": ", 1) for i, arg in enumerate(argv) if arg == "-H")
    body = argv[argv.index("-d") + 1]
    response = client.post(
        argv[argv.index("POST") + 1].removeprefix("http://testserver"),
        body,
        content_type=headers["Content-Type"],
        HTTP_AUTHORIZATION=headers["Authorization"],
    )
    assert response.status_code == 202
    assert AcceptedRequest.objects.count() == 1


def test_each_run_issues_a_fresh_token_and_revokes_the_previous_one(db):
    first = re.search(r"API token:\s+(eds_\S+)", run_demo()).group(1)
    second = re.search(r"API token:\s+(eds_\S+)", run_demo()).group(1)

    assert first != second
    demo_tokens = ApiToken.objects.filter(name="demo (make run)")
    assert demo_tokens.count() == 2
    assert demo_tokens.filter(revoked_at__isnull=True).count() == 1
