import os

from django.core.management.base import BaseCommand
from django.db import transaction

from engagement.models import Product
from engagement.services import product_create
from ingestion.models import IngestionKey
from ingestion.services import ingestion_key_create
from readapi.models import ApiToken
from readapi.services import api_token_create, api_token_revoke

DEMO_PRODUCT = "Demo product"
DEMO_TOKEN_NAME = "demo (make run)"  # noqa: S105 (a label)


class Command(BaseCommand):
    help = (
        "Make sure the demo product exists and print its ingestion key, a fresh API token "
        "(the previous demo token is revoked) and curl lines that work as printed."
    )

    def add_arguments(self, parser):
        parser.add_argument("--base-url", default=None, help="Where the service listens.")

    def handle(self, *args, base_url: str | None = None, **options):
        base_url = base_url or f"http://127.0.0.1:{os.environ.get('PORT', '8000')}"
        with transaction.atomic():
            product = Product.objects.filter(name=DEMO_PRODUCT).order_by("id").first()
            if product is None:
                product, _ = product_create(name=DEMO_PRODUCT)
            key = (
                IngestionKey.objects.filter(product=product, revoked_at__isnull=True)
                .order_by("created_at")
                .first()
            ) or ingestion_key_create(product_id=product.id, label="demo")
            for old in ApiToken.objects.filter(
                product=product, name=DEMO_TOKEN_NAME, revoked_at__isnull=True
            ):
                api_token_revoke(token_id=old.id)
            _, token = api_token_create(product_id=product.id, name=DEMO_TOKEN_NAME)
            workspace = product.workspaces.order_by("id").first()
        self.stdout.write(
            f"""
Demo product {product.id} (workspace {workspace.id})
  ingestion key: {key.key}
  API token:     {token}

Send an event (answers 202):
  curl -i -X POST {base_url}/v2/track -H 'Authorization: Basic {key.key}' \\
    -H 'Content-Type: application/json' \\
    -d '{{"userId": "usr_123", "event": "Report_Created", "context": {{"groupId": "acme"}}}}'

Read accounts ranked by engagement:
  curl -s '{base_url}/v2/accounts?workspace_id={workspace.id}' -H 'Authorization: Bearer {token}'
"""
        )
