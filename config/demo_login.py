"""The embedded demo's dashboard sign-in: a `demo` login with a generated password, made once.

Only in the embedded mode (`make run`): production has no demo login. The password is kept
beside the demo API token, in DATA_DIR/demo-dashboard-password (mode 0600), so a restart prints
the same one. A login called `demo` that this service did not make (its password is not the kept
one) is never changed, except on an explicit `--new-password`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from engagement.models import Product, ProductMembership

DEMO_USERNAME = "demo"


@dataclass(frozen=True, slots=True)
class DemoLogin:
    username: str
    password: str | None  # None: the login exists but its password is not the one kept


def demo_password_file() -> Path:
    return Path(settings.DATA_DIR) / "demo-dashboard-password"


def _kept_password() -> str | None:
    try:
        return demo_password_file().read_text().strip() or None
    except OSError:
        return None


def _keep_password(password: str) -> None:
    path = demo_password_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(password + "\n")


def demo_login_ensure(*, product: Product, new_password: bool = False) -> DemoLogin:
    """The demo login, made (staff, manager of the demo product) if missing; a new password
    when asked for one. The kept password is returned only while it still signs in."""
    user_model = get_user_model()
    with transaction.atomic():
        user = user_model.objects.filter(username=DEMO_USERNAME).first()
        password = None if user is None or new_password else _kept_password()
        if user is not None and password is not None and not user.check_password(password):
            password = None
        if user is None or new_password:
            password = _new_password()
            if user is None:
                user = user_model(username=DEMO_USERNAME)
            user.set_password(password)
            # Staff, to open the admin's pages of the products it manages (the product, its
            # keys, tokens, dropped requests, marketplace connection, automations:
            # engagement/admin_scoping.py); never a superuser.
            user.is_staff = True
            user.is_active = True
            user.save()
            _keep_password(password)
        if password is not None:  # a `demo` this service did not make gets no access
            ProductMembership.objects.update_or_create(
                user=user, product=product, defaults={"role": ProductMembership.Role.MANAGER}
            )
    return DemoLogin(username=DEMO_USERNAME, password=password)


def _new_password() -> str:
    """A password a shell passes as it is: never beginning with '-' or '_'."""
    while True:
        password = secrets.token_urlsafe(12)
        if password[0].isalnum():
            return password
