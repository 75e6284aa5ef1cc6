"""The segment condition language, checked: which fields, operators and values a condition of a
users' or an accounts' segment may hold (engagement/segments.py evaluates them)."""

from __future__ import annotations

from numbers import Real

from django.core.exceptions import ValidationError
from django.utils.dateparse import parse_datetime

from engagement.models import Segment

OPERATORS = (
    "equals",
    "not_equals",
    "contains",
    "greater_than",
    "less_than",
    "is_set",
    "is_not_set",
    "within_last_days",
    "more_than_days_ago",
)
EVENT_OPERATORS = ("count_at_least",)
_DAY_OPERATORS = ("within_last_days", "more_than_days_ago")
# Metrics a condition can test, per target; every one is a column of the score table.
USER_METRICS = (
    "engagement_score",
    "score_change",
    "raw_score",
    "percentile_rank",
    "active_days",
    "events_in_window",
    "adoption",
    "last_seen",
    "tenure_days",
)
ACCOUNT_METRICS = (*USER_METRICS, "active_users", "total_users", "active_user_share")
DATETIME_METRICS = ("last_seen",)
_NO_VALUE = ("is_set", "is_not_set")


def _is_number(value: object) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def segment_conditions_validate(*, target: str, conditions: object) -> list[dict]:
    """The conditions if every one is usable, else a ValidationError listing each fault."""
    if not isinstance(conditions, list):
        raise ValidationError("Conditions must be a list of {field, operator, value} objects.")
    metrics = USER_METRICS if target == Segment.Target.USERS else ACCOUNT_METRICS
    errors: list[str] = []
    for number, condition in enumerate(conditions, start=1):
        where = f"Condition {number}"
        if not isinstance(condition, dict):
            errors.append(f"{where}: must be an object with field, operator and value.")
            continue
        field = condition.get("field")
        if isinstance(field, str) and field.startswith("event:"):
            errors.extend(f"{where}: {fault}" for fault in _event_condition_faults(condition))
            continue
        fault = _condition_fault(condition, metrics)
        if fault:
            errors.append(f"{where}: {fault}")
    if errors:
        raise ValidationError(errors)
    return conditions


def _whole_days(value: object, *, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _event_condition_faults(condition: dict) -> list[str]:
    """What is wrong with an event condition (field "event:<name>")."""
    faults = []
    unknown = set(condition) - {"field", "operator", "value", "within_last_days"}
    if unknown:
        faults.append(f"unknown keys {sorted(unknown)}.")
    if not condition["field"][len("event:") :]:
        faults.append("field needs an event name after 'event:'.")
    if condition.get("operator") not in EVENT_OPERATORS:
        faults.append("an event condition's operator is count_at_least.")
    if not _whole_days(condition.get("value"), least=1):
        faults.append("count_at_least needs a whole number of times (>= 1).")
    days = condition.get("within_last_days")
    if days is not None and not _whole_days(days, least=0):
        faults.append("within_last_days needs a whole number of days (>= 0).")
    return faults


def _condition_fault(condition: dict, metrics: tuple[str, ...]) -> str | None:
    """What is wrong with a trait or metric condition, or None."""
    field = condition.get("field")
    operator = condition.get("operator")
    value = condition.get("value")
    unknown = set(condition) - {"field", "operator", "value"}
    if unknown:
        return f"unknown keys {sorted(unknown)}."
    if operator not in OPERATORS:
        return f"operator must be one of {', '.join(OPERATORS)}."
    if not isinstance(field, str) or not field.startswith(("trait:", "metric:")):
        return "field must be 'trait:<key>', 'metric:<name>' or 'event:<name>'."
    field_kind, name = field.split(":", 1)
    if not name:
        return f"field needs a name after '{field_kind}:'."
    if field_kind == "metric" and name not in metrics:
        return f"unknown metric {name!r}; use one of {', '.join(metrics)}."
    if operator in _NO_VALUE:
        return None
    if value is None:
        return f"{operator} needs a value."
    if operator in _DAY_OPERATORS:
        if not _whole_days(value, least=0):
            return f"{operator} needs a whole number of days (>= 0)."
        if field_kind == "metric" and name not in DATETIME_METRICS:
            return f"{operator} applies to last_seen, not {name}."
        return None
    if operator == "contains":
        if field_kind == "metric":
            return "contains applies to traits, not metrics."
        if not isinstance(value, str) or not value:
            return "contains needs a non-empty text value."
        return None
    if field_kind == "metric":
        if name in DATETIME_METRICS:
            if operator in ("equals", "not_equals"):
                return "compare last_seen with greater_than or less_than."
            if not isinstance(value, str) or parse_datetime(value) is None:
                return "last_seen compares with an ISO 8601 date-time."
        elif not _is_number(value):
            return f"{name} compares with a number."
        return None
    if operator in ("greater_than", "less_than") and not (
        _is_number(value) or isinstance(value, str)
    ):
        return f"{operator} compares with a number or an ISO 8601 date."
    return None
