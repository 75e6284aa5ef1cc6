import json

from django.core.management.base import BaseCommand, CommandError

from engagement.erasure import erasure_request, erasure_run
from engagement.models import Account, Erasure, User


class Command(BaseCommand):
    help = (
        "Erase a user or an account of a product now (in this process), optionally suppressing "
        "its tracking id for later data; prints the erasure's record (counts, no personal data)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--product", type=int, required=True, help="The product's id.")
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--user", help="The user's tracking id.")
        target.add_argument("--account", help="The account's tracking id.")
        parser.add_argument("--suppress", action="store_true", help="Drop its later data.")

    def handle(self, *args, product: int, user, account, suppress: bool, **options):
        kind, model, tracking_id = (
            (Erasure.Kind.USER, User, user) if user else (Erasure.Kind.ACCOUNT, Account, account)
        )
        target = model.objects.filter(product_id=product, tracking_id=tracking_id).first()
        if target is None:
            raise CommandError(f"Product {product} has no {kind} with that tracking id.")
        erasure = erasure_request(
            product_id=product,
            kind=kind,
            target_id=target.id,
            suppress=suppress,
            via=Erasure.Via.COMMAND,
        )
        # The queued task finds it done and does nothing.
        done = erasure_run(erasure_id=erasure.id) or Erasure.objects.get(id=erasure.id)
        self.stdout.write(
            json.dumps({"id": done.id, "kind": kind, "status": done.status, "counts": done.counts})
        )
