import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from automations.display import cooldown_hours, cooldown_shown
from automations.management.errors import command_error
from automations.models import Automation
from automations.services import (
    automation_create,
    automation_faults,
    automation_new,
    cooldown_seconds_of,
)
from engagement.input_rules import DocumentError, document_load
from engagement.models import Segment, Workspace


class Command(BaseCommand):
    help = (
        "Create an automation: when an account or user enters the trigger's condition in a "
        "score refresh, POST a signed webhook (or a Slack message) to --url. A webhook's signing "
        "secret is printed once. Every setting is checked first (docs/automations.md, "
        '"Settings and their bounds"); a fault exits non-zero, listing them all, and '
        "stores nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("--workspace", type=int, required=True, help="Workspace id.")
        parser.add_argument("--trigger", required=True, choices=Automation.Trigger.values)
        parser.add_argument(
            "--threshold",
            type=int,
            help="score_changed: points up or down, 1 to 100 (10 = Red Hot / Ice Cold); "
            "band_entered: the band's floor (75, 50, 25 or 0; omitted: any band).",
        )
        parser.add_argument("--segment", type=int, help="segment_entered/left: segment id.")
        parser.add_argument("--days", type=int, help="inactive: days without an event, 1 to 3650.")
        parser.add_argument(
            "--target", choices=Automation.Target.values, default=Automation.Target.ACCOUNTS
        )
        parser.add_argument(
            "--destination",
            choices=Automation.Destination.values,
            default=Automation.Destination.WEBHOOK,
        )
        parser.add_argument("--url", required=True, help="The receiver (or Slack webhook) URL.")
        parser.add_argument("--name", default="")
        parser.add_argument(
            "--condition",
            action="append",
            default=[],
            metavar="FIELD OPERATOR [VALUE]",
            help="e.g. 'trait:mrr greater_than 100000' (repeatable, at most 50; segment "
            "condition language; VALUE is JSON, or else text).",
        )
        parser.add_argument("--match", choices=Automation.Match.values, default="all")
        parser.add_argument(
            "--cooldown-hours", type=float, default=24.0, help="0 to 8760 (a year); default 24."
        )
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options):
        workspace = Workspace.objects.filter(id=options["workspace"]).first()
        if workspace is None:
            raise CommandError(f"No workspace {options['workspace']}.")
        segment = None
        if options["segment"] is not None:
            segment = Segment.objects.filter(id=options["segment"]).first()
            if segment is None:
                raise CommandError(f"No segment {options['segment']}.")
        conditions, unread = _conditions(options["condition"])
        settings = {
            "workspace": workspace,
            "trigger": options["trigger"],
            "url": options["url"],
            "name": options["name"],
            "target": options["target"],
            "destination": options["destination"],
            "threshold": options["threshold"],
            "segment": segment,
            "days": options["days"],
            "conditions": conditions,
            "match": options["match"],
            "cooldown_seconds": cooldown_seconds_of(options["cooldown_hours"]),
        }
        try:
            if unread:  # listed with every other fault
                faults = automation_faults(automation_new(**settings))
                faults["conditions"] = unread + faults.get("conditions", [])
                raise ValidationError(faults)
            automation = automation_create(**settings)
        except ValidationError as exc:
            raise command_error(exc) from None
        shown = {
            "id": automation.id,
            "name": automation.name,
            "trigger": automation.trigger,
            "cooldown_hours": cooldown_hours(automation.cooldown_seconds),
        }
        if automation.secret:
            shown["secret"] = automation.secret
        if options["json"]:
            self.stdout.write(json.dumps(shown))
            return
        self.stdout.write(
            f"Automation {automation.id} ({automation.name}) created; cool-down "
            f"{cooldown_shown(automation.cooldown_seconds)} per subject."
        )
        if automation.secret:
            self.stdout.write(
                f"Signing secret (shown once; verify webhook-signature with it): "
                f"{automation.secret}"
            )


def _conditions(texts: list[str]) -> tuple[list[dict], list[str]]:
    """The conditions typed as 'FIELD OPERATOR [VALUE]', and the faults of those that could not
    be read. VALUE is read as JSON (a number, true, a quoted text), else taken as text; a VALUE
    that opens a list or an object and is not a usable JSON document is a fault."""
    conditions: list[dict] = []
    unread: list[str] = []
    for number, text in enumerate(texts, start=1):
        parts = text.split(None, 2)
        if len(parts) < 2:
            unread.append(f"--condition {number}: expected 'FIELD OPERATOR [VALUE]'")
            continue
        condition: dict = {"field": parts[0], "operator": parts[1]}
        if len(parts) == 3:
            try:
                condition["value"] = document_load(parts[2])
            except DocumentError as exc:
                if parts[2].startswith(("[", "{")):
                    unread.append(f"--condition {number}: {exc}")
                    continue
                condition["value"] = parts[2]
        conditions.append(condition)
    return conditions, unread
