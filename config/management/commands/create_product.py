import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from engagement.services import product_create
from ingestion.services.keys import ingestion_key_create
from readapi.services import api_token_create


class Command(BaseCommand):
    help = (
        "Create a product with its default workspace, an ingestion key and an API token. "
        "The token is printed once and stored only as a hash."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="The product's name.")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print one JSON object."
        )

    def handle(self, *args: Any, name: str, as_json: bool = False, **options: Any) -> None:
        with transaction.atomic():
            product, workspace = product_create(name=name)
            key = ingestion_key_create(product_id=product.id, label="created with the product")
            _, token = api_token_create(product_id=product.id, name="created with the product")
        result = {
            "product_id": product.id,
            "workspace_id": workspace.id,
            "ingestion_key": key.key,
            "api_token": token,
        }
        if as_json:
            self.stdout.write(json.dumps(result))
        else:
            for field, value in result.items():
                self.stdout.write(f"{field}: {value}")
