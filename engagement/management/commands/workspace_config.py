"""Print a workspace's whole configuration as JSON, or apply one read from standard input."""

from __future__ import annotations

import json
import sys

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from engagement.input_rules import DocumentError, document_load
from engagement.models import Workspace
from engagement.workspace_config import workspace_config_apply, workspace_config_get


def _refused(faults: list[str]) -> CommandError:
    """The command's answer to a document it does not apply: exit status 1, every fault."""
    listed = "\n".join(f"- {fault}" for fault in faults)
    return CommandError(f"Nothing was changed:\n{listed}")


class Command(BaseCommand):
    help = (
        "Print the workspace's configuration (settings, weights, features, activation, "
        "segments) as one JSON document; with --apply, read such a document from standard "
        "input and apply it whole, in one transaction, or list every fault, change nothing and "
        "exit with status 1 (docs/scoring.md, 'A workspace as code')."
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
                document = document_load(sys.stdin.read())
            except UnicodeDecodeError:
                raise _refused(["standard input is not UTF-8 text"]) from None
            except DocumentError as error:
                raise _refused([f"standard input: {error}"]) from None
            try:
                config = workspace_config_apply(workspace_id=workspace.id, document=document)
            except ValidationError as invalid:
                raise _refused(invalid.messages) from None
        else:
            config = workspace_config_get(workspace=workspace)
        self.stdout.write(json.dumps(config, indent=2, ensure_ascii=False))
