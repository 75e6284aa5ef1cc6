from django.core.management.base import BaseCommand, CommandError

from marketplace.models import MarketplaceConnection, SyncRun
from marketplace.services import connection_sync_request


class Command(BaseCommand):
    help = (
        "Start a full sync of a product's marketplace connection now (as the admin's \"Sync "
        'now"), unless one is already running. The sync runs on the marketplace worker; follow '
        "it with marketplace_status."
    )

    def add_arguments(self, parser):
        parser.add_argument("--product", type=int, required=True, help="The service product id.")

    def handle(self, *args, product: int, **options):
        connection = MarketplaceConnection.objects.filter(product_id=product).first()
        if connection is None:
            raise CommandError(f"Product {product} has no marketplace connection.")
        result = connection_sync_request(
            connection_id=connection.id, trigger=SyncRun.Trigger.MANUAL
        )
        if not result.started:
            raise CommandError(result.message)
        self.stdout.write(f"{result.message} Run {result.run_id} of product {product}.")
