import json

from django.core.management.base import BaseCommand, CommandError

from engagement.models import Product
from readapi.models import scopes_parse
from readapi.services import api_token_create


class Command(BaseCommand):
    help = (
        "Issue a read API token for a product, with scopes (read, the default; delete to erase "
        "users and accounts). The token is printed once and stored only as a hash."
    )

    def add_arguments(self, parser):
        parser.add_argument("--product", type=int, required=True, help="The product's id.")
        parser.add_argument("--scopes", default="read", help="Comma-separated: read,delete.")
        parser.add_argument("--name", default="issued with create_api_token")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help='Print {"api_token": ...}.'
        )

    def handle(self, *args, product: int, scopes: str, name: str, as_json: bool, **options):
        if not Product.objects.filter(id=product).exists():
            raise CommandError(f"No product has id {product}.")
        try:
            parsed = scopes_parse(scopes)
        except ValueError as error:
            raise CommandError(str(error)) from error
        _, token = api_token_create(product_id=product, name=name, scopes=parsed)
        if as_json:
            self.stdout.write(json.dumps({"api_token": token}))
        else:
            self.stdout.write(f"api_token: {token} (scopes: {', '.join(parsed)})")
