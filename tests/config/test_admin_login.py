"""Sign-in: a too-long username is a form error on both sign-in pages, never a 500. Admin logins
are throttled (django-axes): 10 wrong passwords lock that username from that address out for 15
minutes, even with the right password next."""

import pytest
from django.conf import settings
from django.test import Client

LOGIN = "/admin/login/"
PASSWORD = "a-Long-passw0rd!x"


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser("vera", "vera@example.com", PASSWORD)


def attempt(client: Client, password: str, *, username: str = "vera", ip: str = "10.0.0.1"):
    return client.post(
        f"{LOGIN}?next=/admin/",
        {"username": username, "password": password},
        REMOTE_ADDR=ip,
    )


def logged_in(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


def test_the_settings_lock_out_after_10_failures_for_15_minutes():
    assert settings.AXES_FAILURE_LIMIT == 10
    assert settings.AXES_COOLOFF_TIME.total_seconds() == 15 * 60
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]
    assert settings.AUTHENTICATION_BACKENDS[0] == "axes.backends.AxesStandaloneBackend"


def test_ten_wrong_passwords_then_the_right_one_is_refused(staff):
    client = Client()
    statuses = [attempt(client, "wrong").status_code for _ in range(10)]
    assert statuses == [200] * 9 + [429]  # the form again with its error; the 10th locks out
    response = attempt(client, PASSWORD)
    assert response.status_code == 429
    assert not logged_in(client)


def test_fewer_failures_still_let_the_right_password_in(staff):
    client = Client()
    for _ in range(9):
        attempt(client, "wrong")
    assert attempt(client, PASSWORD).status_code == 302
    assert logged_in(client)


def test_the_lockout_is_per_username_and_address(staff, django_user_model):
    django_user_model.objects.create_superuser("mia", "mia@example.com", PASSWORD)
    for _ in range(10):
        attempt(Client(), "wrong")
    assert attempt(Client(), PASSWORD).status_code == 429  # same username, same address
    assert attempt(Client(), PASSWORD, ip="10.0.0.2").status_code == 302  # another address
    assert attempt(Client(), PASSWORD, username="mia").status_code == 302  # another username


LONG_NAME = "x" * 300


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_a_300_character_username_is_a_form_error_on_both_sign_in_pages(staff, path):
    from axes.models import AccessAttempt, AccessFailureLog

    response = Client().post(path, {"username": LONG_NAME, "password": "wrong"})

    assert response.status_code == 200
    assert "Ensure this value has at most 150 characters (it has 300)." in response.content.decode()
    assert response.context["form"].errors["username"]
    # It never reached authenticate(), so axes stored nothing about it.
    assert not AccessAttempt.objects.exists()
    assert not AccessFailureLog.objects.exists()


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_a_long_user_agent_and_path_are_recorded_cut_to_their_columns(staff, path):
    from axes.models import AccessAttempt

    response = Client().post(
        f"{path}?next=/{'n' * 600}",
        {"username": "vera", "password": "wrong"},
        HTTP_USER_AGENT="agent/" + "a" * 1000,
        HTTP_ACCEPT="text/html," + "b" * 2000,
    )

    assert response.status_code == 200
    attempt = AccessAttempt.objects.get()
    assert attempt.username == "vera"
    assert len(attempt.user_agent) == 255
    assert len(attempt.http_accept) <= 1025


def test_a_long_username_reaching_authenticate_is_recorded_cut_to_255(staff, rf):
    """Any other path to authenticate() (not the two forms) is recorded, not a 500."""
    from axes.models import AccessAttempt
    from django.contrib.auth import authenticate

    request = rf.post(LOGIN)
    assert authenticate(request, username=LONG_NAME, password="wrong") is None
    assert AccessAttempt.objects.get().username == LONG_NAME[:255]
