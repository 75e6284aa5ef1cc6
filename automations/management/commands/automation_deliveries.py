import json

from django.core.management.base import BaseCommand, CommandError

from automations.models import Automation
from automations.selectors import delivery_list
from engagement.input_rules import whole_fault

MAX_LIMIT = 10_000


class Command(BaseCommand):
    help = (
        "List an automation's deliveries, newest first: id (the webhook-id), event type, status "
        "(delivered, retrying, failed, or cancelled: pending when the automation was switched "
        "off) and attempts."
    )

    def add_arguments(self, parser):
        parser.add_argument("--automation", type=int, required=True)
        parser.add_argument("--limit", type=int, default=100, help=f"1 to {MAX_LIMIT:,}.")
        parser.add_argument("--json", action="store_true", help="Print a JSON list.")

    def handle(self, *args, **options):
        fault = whole_fault(options["limit"], least=1, most=MAX_LIMIT)
        if fault:
            raise CommandError(f"--limit: {fault}")
        automation = Automation.objects.filter(id=options["automation"]).first()
        if automation is None:
            raise CommandError(f"No automation {options['automation']}.")
        rows = [
            {
                "id": item.id,
                "event_type": item.event_type,
                "status": item.status,
                "attempts": item.attempts,
                "created_at": item.created_at.isoformat(),
                "last_status_code": item.last_status_code,
                "last_error": item.last_error,
            }
            for item in delivery_list(automation=automation, limit=options["limit"])
        ]
        if options["json"]:
            self.stdout.write(json.dumps(rows))
            return
        if automation.disabled_reason:
            self.stdout.write(automation.disabled_reason)
        for row in rows:
            self.stdout.write(
                f"{row['id']}  {row['event_type']:<26} {row['status']:<9} "
                f"attempts={row['attempts']}  {row['last_error']}"
            )
