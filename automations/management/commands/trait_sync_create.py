import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from automations.management.errors import command_error
from automations.trait_sync import trait_sync_create
from engagement.models import Workspace


def _whole_or_text(value: str) -> int | str:
    try:
        return int(value)
    except ValueError:
        return value


class Command(BaseCommand):
    help = (
        "Push a workspace's scores, changes and segments as traits (identify for users, group "
        "for accounts) to a Segment-compatible API: Segment, RudderStack, or any /v1/batch."
    )

    def add_arguments(self, parser):
        parser.add_argument("--workspace", type=int, required=True)
        parser.add_argument("--host", required=True, help="e.g. https://api.segment.io")
        parser.add_argument("--write-key", required=True)
        # Read as text: a value that is no whole number is one of the faults listed together.
        parser.add_argument("--interval-minutes", type=_whole_or_text, default=60)
        parser.add_argument("--prefix", default="eds_", help="Prefix of the trait names.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options):
        workspace = Workspace.objects.filter(id=options["workspace"]).first()
        if workspace is None:
            raise CommandError(f"No workspace {options['workspace']}.")
        try:
            sync = trait_sync_create(
                workspace=workspace,
                host=options["host"],
                write_key=options["write_key"],
                interval_minutes=options["interval_minutes"],
                prefix=options["prefix"],
            )
        except ValidationError as exc:
            raise command_error(exc) from None
        if options["json"]:
            self.stdout.write(json.dumps({"id": sync.id, "host": sync.host}))
        else:
            self.stdout.write(
                f"Score sync {sync.id} to {sync.host} every {sync.interval_minutes} min."
            )
