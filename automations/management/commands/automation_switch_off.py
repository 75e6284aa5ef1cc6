import json

from django.core.management.base import BaseCommand, CommandError

from automations.models import Automation
from automations.services import automation_switch_off, switched_off_reason
from engagement.input_rules import text_fault

REASON_MAX_LENGTH = 500


class Command(BaseCommand):
    help = (
        "Switch an automation off: nothing more is sent, its pending and retrying deliveries are "
        "cancelled (status cancelled), and no attempt starts once this returns. Switching it "
        "back on (dashboard or admin) does not send the cancelled ones."
    )

    def add_arguments(self, parser):
        parser.add_argument("--automation", type=int, required=True, help="Automation id.")
        parser.add_argument(
            "--reason",
            default="",
            help=f"Why, shown with the automation (at most {REASON_MAX_LENGTH} characters); "
            "default: when, from the command line.",
        )
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options):
        fault = text_fault(options["reason"], max_length=REASON_MAX_LENGTH, required=False)
        if fault:
            raise CommandError(f"--reason: {fault}")
        automation = Automation.objects.filter(id=options["automation"]).first()
        if automation is None:
            raise CommandError(f"No automation {options['automation']}.")
        was_on = automation.enabled
        reason = options["reason"].strip() or switched_off_reason(where="from the command line")
        cancelled = automation_switch_off(automation=automation, reason=reason)
        if options["json"]:
            shown = {"id": automation.id, "enabled": False, "was_enabled": was_on}
            self.stdout.write(json.dumps({**shown, "cancelled": cancelled}))
            return
        state = "switched off" if was_on else "was already off"
        self.stdout.write(
            f"Automation {automation.id} ({automation.name}) {state}; "
            f"{cancelled} pending delivery(ies) cancelled."
        )
