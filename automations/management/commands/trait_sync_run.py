import json

from django.core.management.base import BaseCommand, CommandError

from automations.models import TraitSync
from automations.trait_sync import trait_sync_run


class Command(BaseCommand):
    help = "Run one score sync now and print what it sent (a switched-off sync does not run)."

    def add_arguments(self, parser):
        parser.add_argument("--sync", type=int, required=True)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        if not TraitSync.objects.filter(id=options["sync"]).exists():
            raise CommandError(f"No score sync {options['sync']}.")
        run = trait_sync_run(sync_id=options["sync"])
        if run is None:
            raise CommandError(
                f"Score sync {options['sync']} is switched off: nothing was sent "
                "(trait_sync_switch --on to run it again)."
            )
        shown = {
            "status": run.status,
            "users_sent": run.users_sent,
            "accounts_sent": run.accounts_sent,
            "error": run.error,
        }
        self.stdout.write(json.dumps(shown) if options["json"] else str(shown))
        if run.status != run.Status.OK:
            raise CommandError(run.error)
