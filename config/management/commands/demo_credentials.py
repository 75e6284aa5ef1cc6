import os
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from config.demo_login import DemoLogin, demo_login_ensure
from engagement.models import Product
from engagement.services import product_create, workspace_create
from ingestion.models import IngestionKey
from ingestion.services.keys import ingestion_key_create
from readapi.models import ApiToken
from readapi.selectors import active_api_token
from readapi.services import api_token_create, api_token_revoke

DEMO_PRODUCT = "Demo product"
DEMO_TOKEN_NAME = "demo (make run)"  # noqa: S105 (a label)
# The user joins the account first: an account scores the mean of its users' scores.
DEMO_IDENTIFY = '{"userId": "usr_123", "groupId": "acme", "traits": {"email": "ann@acme.example"}}'
DEMO_EVENT = '{"userId": "usr_123", "event": "Report_Created", "context": {"groupId": "acme"}}'


def _demo_token_file() -> Path:
    # Beside the embedded database, which holds everything the token can read anyway.
    return Path(settings.DATA_DIR) / "demo-api-token"


def _demo_token(product: Product, *, new_token: bool) -> str:
    """The demo API token this installation printed before (remembered in the data directory),
    or, when it has none or `new_token` asks, a new one, revoking the earlier ones."""
    token = None if new_token else _remembered_demo_token(product.id)
    if token is None:
        if new_token:
            for old in ApiToken.objects.filter(
                product=product, name=DEMO_TOKEN_NAME, revoked_at__isnull=True
            ):
                api_token_revoke(token_id=old.id)
        _, token = api_token_create(product_id=product.id, name=DEMO_TOKEN_NAME)
        _remember_demo_token(token)
    return token


def _remembered_demo_token(product_id: int) -> str | None:
    try:
        plain = _demo_token_file().read_text().strip()
    except OSError:
        return None
    return plain if plain and active_api_token(product_id=product_id, plain=plain) else None


def _remember_demo_token(plain: str) -> None:
    path = _demo_token_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.write_text(plain + "\n")


def _wait_until_healthy(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (our own URL)
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise CommandError(f"{url} did not answer 200 within {timeout:.0f} s")


def _sign_in_lines(base_url: str, login: DemoLogin | None) -> str:
    links = f"Admin: {base_url}/admin/   API docs: {base_url}/api/docs/\n"
    if login is None:  # production: no demo login
        return (
            f"Dashboard: {base_url}/   {links}(sign in with a login made by "
            "python manage.py createsuperuser)\n"
        )
    if login.password is None:
        return (
            f"Dashboard: {base_url}/   sign in as {login.username} (its password is no longer "
            "the one printed before; manage.py demo_credentials --new-password sets a new one)\n"
            + links
        )
    return f"Dashboard: {base_url}/   sign in as {login.username} / {login.password}\n{links}"


class Command(BaseCommand):
    help = (
        "Make sure the demo product exists and print its ingestion key, its API token and curl "
        "lines that work as printed. The token printed last time is printed again while it is "
        "valid (it is kept in DATA_DIR/demo-api-token); --new-token revokes it and issues another. "
        "In the embedded mode, also a dashboard sign-in: the login `demo`, made once, with a "
        "generated password kept in DATA_DIR/demo-dashboard-password; --new-password sets another."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--base-url", default=None, help="Where the service listens.")
        parser.add_argument(
            "--wait",
            action="store_true",
            help="Print only once BASE_URL/healthz answers 200, then stay running (for make run, "
            "so the lines come after the services' start-up output and honcho keeps going).",
        )

        parser.add_argument(
            "--new-token",
            action="store_true",
            help="Revoke the demo API tokens and issue a new one.",
        )
        parser.add_argument(
            "--new-password",
            action="store_true",
            help="Give the demo dashboard login a new generated password (embedded mode only).",
        )

    def handle(
        self,
        *args: Any,
        base_url: str | None = None,
        wait: bool = False,
        new_token: bool = False,
        new_password: bool = False,
        **options: Any,
    ) -> None:
        base_url = base_url or f"http://127.0.0.1:{os.environ.get('PORT', '8000')}"
        if wait:
            _wait_until_healthy(f"{base_url}/healthz", timeout=120)
        with transaction.atomic():
            product = Product.objects.filter(name=DEMO_PRODUCT).order_by("id").first()
            if product is None:
                product, _ = product_create(name=DEMO_PRODUCT)
            key = (
                IngestionKey.objects.filter(product=product, revoked_at__isnull=True)
                .order_by("created_at")
                .first()
            ) or ingestion_key_create(product_id=product.id, label="demo")
            token = _demo_token(product, new_token=new_token)
            # A product starts with a workspace, but an operator may have deleted it since.
            workspace = product.workspaces.order_by("id").first() or workspace_create(
                product=product, name="Default"
            )
            login = None
            if not settings.PRODUCTION:
                login = demo_login_ensure(product=product, new_password=new_password)

        def post(path: str, body: str) -> str:
            return (
                f"curl -i -X POST {base_url}/{path} -H 'Authorization: Basic {key.key}' "
                f"-H 'Content-Type: application/json' -d '{body}'"
            )

        identify, track = post("v2/identify", DEMO_IDENTIFY), post("v2/track", DEMO_EVENT)
        read = (
            f"curl -s '{base_url}/v2/accounts?workspace_id={workspace.id}' "
            f"-H 'Authorization: Bearer {token}'"
        )
        self.stdout.write(
            f"Demo product {product.id} (workspace {workspace.id}) is ready at {base_url}\n"
            f"ingestion key: {key.key}\n"
            f"API token:     {token}\n"
            "Identify a user of the account acme, then send an event (each answers 202):\n"
            f"{identify}\n"
            f"{track}\n"
            "Read accounts ranked by engagement (scores move within seconds of an event):\n"
            f"{read}\n"
            f"{_sign_in_lines(base_url, login)}"
        )
        self.stdout.flush()
        if wait:
            signal.pause()  # honcho stops every process when one exits; Ctrl-C ends this one
