"""DELETE /v2/users/{id} and /v2/accounts/{id}: a token with the delete scope gets 202 and a
receipt, the deletion reads pending then completed with counts; a read-only token gets 403
with the one error body; another product's ids and deletions answer 404."""

import json

import pytest
from django.core.management import call_command

from engagement.erasure_hooks import ErasureStage
from engagement.models import Account, Erasure, Suppression, User
from engagement.tasks import erasure_run_task
from readapi.models import ApiToken
from readapi.services import api_token_create
from tests.readapi.conftest import add_account, add_user, link


@pytest.fixture
def deleter(acme) -> str:
    _, token = api_token_create(product_id=acme.product.id, name="eraser", scopes=["delete"])
    return f"Bearer {token}"


def delete(api_client, path: str, bearer: str):
    return api_client.delete(path, HTTP_AUTHORIZATION=bearer)


def test_a_user_is_erased_through_the_api(
    acme, api_client, deleter, django_capture_on_commit_callbacks
):
    ada = add_user(acme, "ada-1", email="ada@x.test")
    link(ada, add_account(acme, "acct-1"))

    with django_capture_on_commit_callbacks() as queued:
        response = delete(api_client, f"/v2/users/{ada.id}?suppress=true", deleter)

    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "pending"
    assert body["_links"] == {"self": f"/v2/deletions/{body['id']}"}
    assert len(queued) == 1  # the task, queued once the request is stored
    pending = api_client.get(body["_links"]["self"], HTTP_AUTHORIZATION=deleter).json()
    assert pending["status"] == "pending" and pending["kind"] == "user"

    erasure_run_task(body["id"])  # what the worker does with the queued task

    done = api_client.get(body["_links"]["self"], HTTP_AUTHORIZATION=deleter).json()
    assert done["status"] == "completed" and done["reason"] is None
    assert done["counts"]["users"] == 1 and done["counts"]["memberships"] == 1
    assert not User.objects.filter(id=ada.id).exists()
    assert Suppression.objects.filter(product=acme.product, kind="user").count() == 1
    record = Erasure.objects.get(id=body["id"])
    assert record.via == "api" and record.requested_by_token_id is not None
    assert "ada" not in json.dumps(done)


def broken(target) -> dict[str, int]:
    raise ValueError("a bug")


def test_a_failed_deletions_receipt_says_why_and_nothing_was_erased(
    acme, api_client, deleter, erasure_hook
):
    """Only a cause that retrying cannot fix fails a deletion (issue 28); the receipt names it,
    never quoting the error's message."""
    erasure_hook(broken, ErasureStage.AFTER_TARGET)
    ada = add_user(acme, "ada-1", email="ada@x.test")
    receipt = delete(api_client, f"/v2/users/{ada.id}", deleter).json()

    with pytest.raises(ValueError, match="a bug"):
        erasure_run_task(receipt["id"])

    done = api_client.get(receipt["_links"]["self"], HTTP_AUTHORIZATION=deleter).json()
    assert done["status"] == "failed" and done["counts"] == {}
    assert done["reason"].startswith("ValueError: a failure that retrying cannot fix")
    assert "a bug" not in done["reason"]
    assert User.objects.filter(id=ada.id, email="ada@x.test").exists()


def test_an_account_erasure_keeps_its_users(acme, api_client, deleter):
    account = add_account(acme, "acct-1")
    user = add_user(acme, "u-1")
    link(user, account)
    response = delete(api_client, f"/v2/accounts/{account.id}", deleter)
    assert response.status_code == 202
    erasure_run_task(response.json()["id"])
    assert not Account.objects.filter(id=account.id).exists()
    assert User.objects.filter(id=user.id, memberships__isnull=True).exists()


def test_a_read_only_token_gets_403(acme, api_client):
    ada = add_user(acme, "ada-1")
    response = delete(api_client, f"/v2/users/{ada.id}", acme.bearer)
    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
    assert set(response.json()) <= {"code", "message", "fields"}
    assert User.objects.filter(id=ada.id).exists()
    assert not Erasure.objects.exists()


def test_another_products_user_account_and_deletion_answer_404(acme, globex, api_client, deleter):
    stranger = add_user(globex, "g-1")
    their_account = add_account(globex, "g-acct")
    assert delete(api_client, f"/v2/users/{stranger.id}", deleter).status_code == 404
    assert delete(api_client, f"/v2/accounts/{their_account.id}", deleter).status_code == 404
    assert User.objects.filter(id=stranger.id).exists()
    _, theirs = api_token_create(product_id=globex.product.id, name="g", scopes=["delete"])
    receipt = delete(api_client, f"/v2/users/{stranger.id}", f"Bearer {theirs}").json()
    response = api_client.get(f"/v2/deletions/{receipt['id']}", HTTP_AUTHORIZATION=deleter)
    assert response.status_code == 404


def test_get_still_reads_the_user(acme, api_client, deleter):
    ada = add_user(acme, "ada-1")
    response = api_client.get(f"/v2/users/{ada.id}", HTTP_AUTHORIZATION=deleter)
    assert response.status_code == 200 and response.json()["id"] == ada.id


def test_create_api_token_issues_a_token_with_scopes(acme, api_client, capsys):
    call_command(
        "create_api_token", "--product", str(acme.product.id), "--scopes", "read,delete", "--json"
    )
    plain = json.loads(capsys.readouterr().out)["api_token"]
    assert ApiToken.objects.get(prefix=plain[:10]).scopes == ["read", "delete"]
    ada = add_user(acme, "ada-1")
    assert delete(api_client, f"/v2/users/{ada.id}", f"Bearer {plain}").status_code == 202
