"""What a delivery id in an address or a form can be, so that anything else is "no such
delivery" (a 404) before it reaches the database, which refuses a NUL in a string outright.

A delivery's id is `msg_` and 32 hex digits (automations.services.delivery_id_new, the
`webhook-id` its receiver sees); what is accepted here is a little wider, `msg_` and up to 36
ASCII letters or digits, everything the 40-character column could hold in that form."""

from __future__ import annotations

import re

DELIVERY_ID = re.compile(r"msg_[0-9A-Za-z]{1,36}")


def is_delivery_id(value: object) -> bool:
    return isinstance(value, str) and DELIVERY_ID.fullmatch(value) is not None


class DeliveryIdConverter:
    """`<delivery:...>` in a path: only text of a delivery id's form routes; any other
    address is the 404 of an address no page has."""

    regex = DELIVERY_ID.pattern

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value
