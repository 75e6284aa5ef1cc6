"""`make run` prints a demo key, token and curl lines that work as printed."""

import re
import shlex
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from engagement.models import AccountScore, ProductMembership, Workspace
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


def test_a_demo_product_whose_workspace_was_deleted_gets_one_again(db, client):
    run_demo()
    Workspace.objects.filter(product__name="Demo product").delete()

    printed = run_demo()

    workspace = Workspace.objects.get(product__name="Demo product")
    assert f"(workspace {workspace.id})" in printed
    response = client.get(
        f"/v2/accounts?workspace_id={workspace.id}",
        HTTP_AUTHORIZATION=f"Bearer {printed_token(printed)}",
    )
    assert response.status_code == 200


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


def printed_sign_in(printed: str) -> tuple[str, str]:
    found = re.search(r"^Dashboard: http://testserver/\s+sign in as (\S+) / (\S+)$", printed, re.M)
    assert found, printed
    return found.group(1), found.group(2)


def signs_in(username: str, password: str) -> bool:
    response = Client().post("/login/", {"username": username, "password": password})
    return response.status_code == 302


def test_the_printed_dashboard_sign_in_opens_the_demo_product(db, demo_data_dir):
    printed = run_demo()
    username, password = printed_sign_in(printed)

    assert "createsuperuser" not in printed
    client = Client()
    response = client.post("/login/", {"username": username, "password": password}, follow=True)
    workspace = Workspace.objects.get(product__name="Demo product")
    assert response.redirect_chain[-1][0] == f"/w/{workspace.id}/"
    assert b"Demo product" in response.content
    assert (demo_data_dir / "demo-dashboard-password").stat().st_mode & 0o077 == 0
    demo = get_user_model().objects.get(username="demo")
    assert (demo.is_staff, demo.is_superuser) == (True, False)


def test_a_restart_prints_the_same_password_and_new_password_replaces_it(db):
    first = printed_sign_in(run_demo())
    assert printed_sign_in(run_demo()) == first

    out = StringIO()
    call_command(
        "demo_credentials", "--base-url", "http://testserver", "--new-password", stdout=out
    )
    second = printed_sign_in(out.getvalue())

    assert second[1] != first[1]
    assert signs_in("demo", second[1])
    assert not signs_in("demo", first[1])
    assert get_user_model().objects.filter(username="demo").count() == 1


def test_a_demo_login_the_service_did_not_make_is_left_alone(db):
    get_user_model().objects.create_user(username="demo", password="mine-own-password")

    printed = run_demo()

    assert "sign in as demo (its password is no longer the one printed before" in printed
    assert signs_in("demo", "mine-own-password")
    assert not ProductMembership.objects.filter(user__username="demo").exists()


def test_production_makes_no_demo_login(db, settings):
    settings.PRODUCTION = True

    printed = run_demo()

    assert "sign in as" not in printed and "createsuperuser" in printed
    assert not get_user_model().objects.filter(username="demo").exists()
