"""How automations' settings and deliveries are shown to people, the same on every surface (the
dashboard, the admin, the commands): the cool-down in hours, and a delivery's body as the JSON
that was sent."""

from __future__ import annotations

import json

from django.utils import timezone

from automations.delivery import request_of
from automations.models import Delivery


def _counted(number: int, unit: str) -> str:
    return f"{number:,} {unit}{'' if number == 1 else 's'}"


def cooldown_shown(seconds: int) -> str:
    """A cool-down (stored in seconds) in the unit people set it in, hours: "24 hours",
    "1 hour"; one that is not a whole number of hours in minutes ("30 minutes"), or in seconds
    when not a whole number of minutes either (only the admin of old could store such)."""
    if seconds % 3600 == 0:
        return _counted(seconds // 3600, "hour")
    if seconds % 60 == 0:
        return _counted(seconds // 60, "minute")
    return _counted(seconds, "second")


def cooldown_hours(seconds: int) -> int | float:
    """A cool-down in hours, as a form shows it: 24, not 24.0."""
    hours = seconds / 3600
    return int(hours) if hours.is_integer() else hours


def delivery_body_shown(delivery: Delivery) -> str:
    """The body its destination receives (a webhook's event, or the Slack message made of it),
    as indented JSON."""
    body, _ = request_of(delivery, timezone.now())
    return json.dumps(json.loads(body), indent=2, ensure_ascii=False)
