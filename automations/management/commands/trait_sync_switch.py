from django.core.management.base import BaseCommand, CommandError

from automations.models import TraitSync
from automations.trait_sync import trait_sync_switch


class Command(BaseCommand):
    help = (
        "Switch a score sync off (no run starts once this returns, and a run under way stops "
        "before its next batch) or back on."
    )

    def add_arguments(self, parser):
        parser.add_argument("--sync", type=int, required=True)
        state = parser.add_mutually_exclusive_group(required=True)
        state.add_argument("--off", action="store_true")
        state.add_argument("--on", action="store_true")

    def handle(self, *args, **options):
        sync = TraitSync.objects.filter(id=options["sync"]).first()
        if sync is None:
            raise CommandError(f"No score sync {options['sync']}.")
        trait_sync_switch(sync=sync, enabled=options["on"])
        self.stdout.write(f"Score sync {sync.id} is {'on' if sync.enabled else 'off'}.")
