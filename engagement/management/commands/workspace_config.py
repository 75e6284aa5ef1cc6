"""Print a workspace's whole configuration as JSON, or apply one read from standard input."""

from __future__ import annotations

import json
import sys

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from engagement.models import Workspace
from engagement.workspace_config import workspace_config_apply, workspace_config_get


class Command(BaseCommand):
    help = (
        "Print the workspace's configuration (settings, weights, segments) as one JSON "
        "document; with --apply, read such a document from standard input and apply it whole, "
        "in one transaction, or list every fault and change nothing."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--workspace", type=int, required=True, help="The workspace's id.")
        parser.add_argument(
            "--apply", action="store_true", help="Apply the document on standard input."
        )

    def handle(self, *args, **options) -> None:
        workspace = Workspace.objects.filter(id=options["workspace"]).first()
        if workspace is None:
            raise CommandError(f"No workspace with id {options['workspace']}.")
        if options["apply"]:
            try:
                document = json.loads(sys.stdin.read())
            except ValueError as error:
                raise CommandError(f"Standard input is not JSON: {error}") from error
            try:
                config = workspace_config_apply(workspace_id=workspace.id, document=document)
            except ValidationError as invalid:
                faults = "\n".join(f"- {message}" for message in invalid.messages)
                raise CommandError(f"Nothing was changed:\n{faults}") from invalid
        else:
            config = workspace_config_get(workspace=workspace)
        self.stdout.write(json.dumps(config, indent=2, ensure_ascii=False))
