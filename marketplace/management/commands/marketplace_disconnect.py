from django.core.management.base import BaseCommand, CommandError

from marketplace.models import MarketplaceConnection
from marketplace.services import connections_disconnect


class Command(BaseCommand):
    help = (
        "Disconnect a product's marketplace connection (as the admin's \"Disconnect\"): a "
        "running sync stops before its next request, the schedule stops and the stored token is "
        "erased; imported am. traits stay. Connect again with marketplace_connect."
    )

    def add_arguments(self, parser):
        parser.add_argument("--product", type=int, required=True, help="The service product id.")

    def handle(self, *args, product: int, **options):
        connection = MarketplaceConnection.objects.filter(product_id=product).first()
        if connection is None:
            raise CommandError(f"Product {product} has no marketplace connection.")
        if not connections_disconnect(connection_ids=[connection.id]):
            self.stdout.write(f"Product {product}'s connection was already disconnected.")
            return
        self.stdout.write(f"Disconnected product {product}; future syncs stopped.")
