import getpass
import os
import sys

from django.core.management.base import BaseCommand, CommandError

from engagement.models import Product
from marketplace.services import (
    ConnectionDetailsError,
    TokenDateError,
    connection_configure,
    connection_details_check,
    token_set_on_parse,
)

CREDENTIAL_ENV_NAME = "MARKETPLACE_API_TOKEN"


class Command(BaseCommand):
    help = (
        "Connect a product to a marketplace app (all four values; the token is stored encrypted "
        "and never printed). Looks up the developer ID, finds the app in the vendor's listing, "
        "makes the connection active and starts the first full sync. The API token is read "
        f"from the {CREDENTIAL_ENV_NAME} environment variable or, when that is unset, from "
        "standard input (a prompt on a terminal); --token also works but shows the token to "
        "every user of the machine (ps)."
    )
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument("--product", type=int, required=True, help="The service product id.")
        parser.add_argument("--email", required=True, help="Marketplace account email.")
        parser.add_argument(
            "--token",
            default="",
            help=f"Marketplace API token (visible in ps: prefer {CREDENTIAL_ENV_NAME} or stdin).",
        )
        parser.add_argument("--vendor-id", required=True, help="Numeric marketplace vendor ID.")
        app = parser.add_mutually_exclusive_group(required=True)
        app.add_argument("--app-key", default="", help="The app's key, e.g. com.example.app.")
        app.add_argument("--app-name", default="", help="The app's name in the listing.")
        app.add_argument("--product-id", default="", help="The app's marketplace productId.")
        parser.add_argument(
            "--token-set-on",
            default="",
            metavar="YYYY-MM-DD",
            help="The day the API token was created, when earlier than today (its age is "
            "watched: Atlassian tokens expire within a year). Default: today.",
        )

    def _token(self, options) -> str:
        if options["token"]:
            return options["token"].strip()
        from_env = os.environ.get(CREDENTIAL_ENV_NAME, "").strip()
        if from_env:
            return from_env
        stdin = options.get("stdin") or sys.stdin
        if stdin.isatty():
            return getpass.getpass("Marketplace API token: ").strip()
        return stdin.readline().strip()

    def handle(self, *args, **options):
        product_id = options["product"]
        if not Product.objects.filter(id=product_id).exists():
            raise CommandError(f"No product {product_id}.")
        token_set_on = None
        if options["token_set_on"]:
            try:
                token_set_on = token_set_on_parse(options["token_set_on"])
            except TokenDateError as exc:
                raise CommandError(f"--token-set-on: {exc}") from None
        options["token"] = self._token(options)
        if not options["token"]:
            raise CommandError(
                f"No API token: set {CREDENTIAL_ENV_NAME} or write the token to standard input."
            )
        try:
            resolved = connection_details_check(
                email=options["email"],
                api_token=options["token"],
                vendor_id=options["vendor_id"],
                app_key=options["app_key"],
                app_name=options["app_name"],
                product_id=options["product_id"],
            )
        except ConnectionDetailsError as exc:
            listing = "".join(
                f"\n  {app.app_name} (key {app.app_key}, productId {app.product_id})"
                for app in exc.apps
            )
            hint = f"\nThe vendor's apps:{listing}" if listing else ""
            raise CommandError(exc.message + hint) from exc
        connection = connection_configure(
            product_id=product_id,
            email=options["email"],
            api_token=options["token"],
            vendor_id=options["vendor_id"],
            developer_id=resolved.developer_id,
            marketplace_product_id=resolved.product_id,
            app_name=resolved.app_name,
            token_set_on=token_set_on,
        )
        assert connection.token_set_on is not None  # set with the token
        self.stdout.write(
            f"Connected product {product_id} to {resolved.app_name} ({resolved.product_id}); "
            f"state {connection.state}; token set on {connection.token_set_on.isoformat()}; "
            "the first sync has been queued."
        )
