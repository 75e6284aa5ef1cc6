import json
import time

from django.core.management.base import BaseCommand, CommandError

from engagement.erasure import (
    ErasureDeferred,
    erasure_failure_reason,
    erasure_request,
    erasure_run,
)
from engagement.models import Account, Erasure, User
from engagement.tasks import erasure_retry_seconds


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
        done = self._run_until_done(erasure.id)
        record = {"id": done.id, "kind": kind, "status": done.status, "counts": done.counts}
        if done.status == Erasure.Status.FAILED:
            record["reason"] = erasure_failure_reason(done)
        self.stdout.write(json.dumps(record))
        if done.status == Erasure.Status.FAILED:
            raise CommandError(record["reason"])

    def _run_until_done(self, erasure_id: int) -> Erasure:
        """Run it here, again after transient failures (the queued task finds it done and does
        nothing), or wait while a worker runs it: until it completes or fails."""
        retries = 0
        while True:
            try:
                erasure_run(erasure_id=erasure_id)
            except ErasureDeferred:
                pause = erasure_retry_seconds(retries)
                self.stderr.write(f"The database is not answering; trying again in {pause} s.")
                retries += 1
                time.sleep(pause)
                continue
            except Exception as error:  # recorded as failed, with its cause
                self.stderr.write(f"The erasure failed: {type(error).__name__}.")
            done = Erasure.objects.get(id=erasure_id)
            if done.status in (Erasure.Status.COMPLETED, Erasure.Status.FAILED):
                return done
            time.sleep(1)  # a worker's task runs it right now
