import json

from django.core.management.base import BaseCommand, CommandError

from engagement.models import Product
from marketplace.selectors import connection_status


class Command(BaseCommand):
    help = "Print a product's marketplace connection: state, last success and error, last runs."

    def add_arguments(self, parser):
        parser.add_argument("--product", type=int, required=True, help="The service product id.")
        parser.add_argument("--runs", type=int, default=10, help="How many recent runs to show.")
        parser.add_argument("--json", action="store_true", dest="as_json", help="One JSON object.")

    def handle(self, *args, product: int, runs: int, as_json: bool = False, **options):
        if not Product.objects.filter(id=product).exists():
            raise CommandError(f"No product {product}.")
        status = connection_status(product_id=product, runs=runs)
        if as_json:
            self.stdout.write(json.dumps(status))
            return
        for key, value in status.items():
            if key != "runs":
                self.stdout.write(f"{key}: {value}")
        for run in status.get("runs", []):
            self.stdout.write(
                f"run {run['id']} {run['trigger']}/{run['mode']} {run['started_at']} "
                f"{run['outcome']}: {run['pages']} pages, {run['licenses_seen']} licenses, "
                f"{run['accounts_matched']} matched, {run['accounts_created']} created, "
                f"{run['skipped_without_cloud_id']} without cloudId, "
                f"{run['skipped_invalid']} skipped as invalid, {run['retries']} retries"
                + (f" ({run['error']})" if run["error"] else "")
            )
            for reason in run["skipped_reasons"]:
                self.stdout.write(
                    f"  skipped {reason['license']}: {reason['field']} {reason['reason']}"
                )
