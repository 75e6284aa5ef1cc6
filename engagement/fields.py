"""Model fields of the engagement app."""

from __future__ import annotations

import json
from typing import Any

from django.db import models


class BreakdownField(models.TextField):
    """A score breakdown: `[{"event", "count", "weight", "points"}]` in Python, stored compact.

    The database holds JSON text `[[event, count, weight], ...]` (points = count x weight). The
    scoring engine builds that text in SQL for up to a million rows per rescore: a third of the
    size of the object form and, as text rather than JSONB, nothing for PostgreSQL to parse.
    Rows written in the object form are read as well. The engine stores the items in event name
    order, the order a user's events stream in (ordering them by points in SQL sorted every
    user's events again, about 3 s of a rescore, docs/benchmarks.md); read back, they are in
    the order served: biggest points first, then by event name.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("default", list)
        kwargs.setdefault("blank", True)
        super().__init__(*args, **kwargs)

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> list[dict]:
        return self.to_python(value)

    def to_python(self, value: Any) -> list[dict]:
        if value is None or value == "":
            return []
        items = json.loads(value) if isinstance(value, str) else value
        expanded = [_expanded(item) for item in items]
        return sorted(expanded, key=_served_order)

    def get_prep_value(self, value: Any) -> str:
        items = self.to_python(value)
        return json.dumps(
            [[item["event"], item["count"], item["weight"]] for item in items],
            separators=(",", ":"),
        )

    def value_to_string(self, obj: models.Model) -> str:
        return self.get_prep_value(self.value_from_object(obj))


def _expanded(item: Any) -> dict:
    if isinstance(item, dict):
        count, weight = item.get("count", 0), item.get("weight", 0)
        return {
            "event": item.get("event"),
            "count": count,
            "weight": weight,
            "points": item.get("points", count * weight),
        }
    event, count, weight = item
    return {"event": event, "count": count, "weight": weight, "points": count * weight}


def _served_order(item: dict) -> tuple:
    """Biggest points first, then by event name; items whose points are not a number (only
    ever in rows written by hand in the object form) after the others, as stored."""
    points = item["points"]
    if isinstance(points, bool) or not isinstance(points, int | float):
        return (1, 0, "")
    return (0, -points, str(item["event"]))
