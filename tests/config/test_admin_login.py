"""Admin logins are throttled (django-axes): 10 wrong passwords lock that username from that
address out for 15 minutes, even with the right password next."""

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
