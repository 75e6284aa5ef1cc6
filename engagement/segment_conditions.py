"""The segment condition language, checked: which fields, operators and values a condition of a
users' or an accounts' segment (or an automation) may hold; engagement/segments.py evaluates them.
A condition may also be a group, {"any": [conditions]}, which holds when one of its conditions
does (one level: a group holds no group).

Every value is bounded so that whatever passes can be evaluated on both databases: names and
texts are storable (engagement/input_rules), days are 0 to 3,650, counts below 2**31, a metric is
compared with a number its column can be compared with, and last_seen with a date-time whose
year neither overflows nor means nothing. Faults carry the path of the value they are about,
list positions counted from 0 (`conditions[2].value: ...`).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.backends.base.operations import BaseDatabaseOperations

from engagement.input_rules import (
    MAX_CONDITIONS,
    at,
    date_time_fault,
    days_fault,
    is_number,
    number_fault,
    plain_value_fault,
    text_fault,
    whole_fault,
)
from engagement.models import AccountScore, Segment

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
    "within_next_days",
)
EVENT_OPERATORS = ("count_at_least",)
_DAY_OPERATORS = ("within_last_days", "more_than_days_ago")
# A date ahead (a renewal, a maintenance end): traits only, from tomorrow to N days ahead.
_AHEAD_OPERATORS = ("within_next_days",)
# A group: {"any": [conditions]} holds when at least one of its conditions does, so that a
# segment that matches all its conditions can hold an "or" among them. Groups do not nest.
GROUP_KEY = "any"
# Metrics a condition can test, per target; every one but the percentile rank is a column of the
# score table (the rank is read from the score: segments._metric_q).
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
_CONDITION_KEYS = ("field", "operator", "value")
_EVENT_CONDITION_KEYS = (*_CONDITION_KEYS, "within_last_days")
# A trait's or an event's name, as the ingestion door takes them; a text compared with a trait.
NAME_MAX = 255
VALUE_MAX = 1000
# The numbers a whole-number metric can be compared with: its column's range. Beyond it Django
# gives up on the lookup (EmptyResultSet), and the query around it with it.
WHOLE_METRIC_RANGES: dict[str, tuple[int, int]] = {
    name: BaseDatabaseOperations.integer_field_ranges[internal_type]
    for name in ACCOUNT_METRICS
    if name != "percentile_rank"
    and (internal_type := AccountScore._meta.get_field(name).get_internal_type())
    in BaseDatabaseOperations.integer_field_ranges
}


def segment_conditions_faults(
    *, target: str, conditions: object, path: str = "conditions"
) -> list[str]:
    """Every fault of a list of conditions, each after its path (`conditions[2].value: ...`,
    under `path`), or [] when every one is usable."""
    if not isinstance(conditions, list):
        return [at(path, "a list of {field, operator, value} objects")]
    if len(conditions) > MAX_CONDITIONS:
        return [at(path, f"at most {MAX_CONDITIONS} conditions (this list has {len(conditions)})")]
    metrics = USER_METRICS if target == Segment.Target.USERS else ACCOUNT_METRICS
    faults: list[str] = []
    for position, condition in enumerate(conditions):
        faults += _condition_faults(condition, metrics, f"{path}[{position}]")
    return faults


def segment_conditions_validate(
    *, target: str, conditions: object, path: str = "conditions"
) -> list[dict]:
    """The conditions if every one is usable, else a ValidationError listing each fault."""
    faults = segment_conditions_faults(target=target, conditions=conditions, path=path)
    if faults:
        raise ValidationError(faults)
    return conditions  # type: ignore[return-value]  # a list of objects, as just checked


def _unknown_keys_fault(condition: dict, known: tuple[str, ...]) -> str | None:
    unknown = [key for key in condition if key not in known]
    if not unknown:
        return None
    shown = ", ".join(repr(key) for key in unknown)
    return f"unknown keys {shown}; a condition has {', '.join(known)}"


def _condition_faults(condition: object, metrics: tuple[str, ...], where: str) -> list[str]:
    """What is wrong with one condition, each fault after its path."""
    if not isinstance(condition, dict):
        return [at(where, "an object with field, operator and value")]
    if GROUP_KEY in condition:
        return _group_faults(condition, metrics, where)
    field = condition.get("field")
    if isinstance(field, str) and field.startswith("event:"):
        return _event_condition_faults(condition, where)
    faults = []
    if unknown := _unknown_keys_fault(condition, _CONDITION_KEYS):
        faults.append(at(where, unknown))
    field_fault = _field_fault(field, metrics)
    if field_fault:
        faults.append(at(f"{where}.field", field_fault))
    operator = condition.get("operator")
    if operator not in OPERATORS:
        faults.append(at(f"{where}.operator", f"one of {', '.join(OPERATORS)}"))
    if field_fault or operator not in OPERATORS:
        return faults
    kind, name = field.split(":", 1)  # type: ignore[union-attr]  # a checked field
    fault = _operator_fault(kind, name, operator)
    if fault:
        return [*faults, at(f"{where}.operator", fault)]
    fault = _value_fault(kind, name, operator, condition.get("value"))
    if fault:
        faults.append(at(f"{where}.value", fault))
    return faults


def _group_faults(group: dict, metrics: tuple[str, ...], where: str) -> list[str]:
    """What is wrong with a group {"any": [conditions]}: at least one condition, none a group."""
    if unknown := _unknown_keys_fault(group, (GROUP_KEY,)):
        return [at(where, unknown.replace("a condition has", "a group has"))]
    inner = group[GROUP_KEY]
    path = f"{where}.{GROUP_KEY}"
    if not isinstance(inner, list) or not inner:
        return [at(path, "a list of at least one {field, operator, value} object")]
    if len(inner) > MAX_CONDITIONS:
        return [at(path, f"at most {MAX_CONDITIONS} conditions (this list has {len(inner)})")]
    faults: list[str] = []
    for position, condition in enumerate(inner):
        if isinstance(condition, dict) and GROUP_KEY in condition:
            faults.append(at(f"{path}[{position}]", "a group cannot hold a group"))
        else:
            faults += _condition_faults(condition, metrics, f"{path}[{position}]")
    return faults


def is_group(condition: object) -> bool:
    return isinstance(condition, dict) and GROUP_KEY in condition


def _field_fault(field: object, metrics: tuple[str, ...]) -> str | None:
    if not isinstance(field, str) or not field.startswith(("trait:", "metric:")):
        return "'trait:<key>', 'metric:<name>' or 'event:<name>'"
    kind, name = field.split(":", 1)
    if kind == "metric":
        return None if name in metrics else f"a metric, one of {', '.join(metrics)}"
    return text_fault(name, max_length=NAME_MAX, what="'trait:' and a trait name")


def _operator_fault(kind: str, name: str, operator: str) -> str | None:
    """Why the operator does not apply to this field, or None."""
    if kind != "metric":
        return None
    if operator in _AHEAD_OPERATORS:
        return f"{operator} applies to traits (a date ahead), not metrics"
    if operator in _DAY_OPERATORS and name not in DATETIME_METRICS:
        return f"{operator} applies to last_seen, not {name}"
    if operator == "contains":
        return "contains applies to traits, not metrics"
    if name in DATETIME_METRICS and operator in ("equals", "not_equals"):
        return "compare last_seen with greater_than, less_than or a days operator"
    return None


def _value_fault(kind: str, name: str, operator: str, value: object) -> str | None:
    """What is wrong with the value a field and an operator that go together compare with."""
    if operator in _NO_VALUE:  # the value is not read; if there is one, it is stored all the same
        return None if value is None else plain_value_fault(value, max_length=VALUE_MAX)
    if value is None:
        return f"{operator} needs a value"
    if operator in _DAY_OPERATORS:
        fault = days_fault(value)
        return f"{operator} counts days: {fault}" if fault else None
    if operator in _AHEAD_OPERATORS:
        fault = days_fault(value, least=1)
        return f"{operator} counts days: {fault}" if fault else None
    if operator == "contains":
        return text_fault(value, max_length=VALUE_MAX, what="a text")
    if kind == "metric":
        if name in DATETIME_METRICS:
            return date_time_fault(value)
        return _metric_value_fault(name, value)
    if operator in ("greater_than", "less_than") and isinstance(value, bool):
        return f"{operator} compares with a number or a text (an ISO 8601 date compares as text)"
    return plain_value_fault(value, max_length=VALUE_MAX)


def _metric_value_fault(name: str, value: object) -> str | None:
    if name not in WHOLE_METRIC_RANGES:
        return number_fault(value)
    least, most = WHOLE_METRIC_RANGES[name]
    if is_number(value) and least <= value <= most:  # type: ignore[operator]  # NaN fails
        return None
    return f"{name} compares with a number from {least:,} to {most:,}"


def _event_condition_faults(condition: dict, where: str) -> list[str]:
    """What is wrong with an event condition (field "event:<name>")."""
    faults = []
    if unknown := _unknown_keys_fault(condition, _EVENT_CONDITION_KEYS):
        faults.append(at(where, unknown))
    name = condition["field"][len("event:") :]
    if fault := text_fault(name, max_length=NAME_MAX, what="'event:' and an event name"):
        faults.append(at(f"{where}.field", fault))
    if condition.get("operator") not in EVENT_OPERATORS:
        faults.append(at(f"{where}.operator", "an event condition's operator is count_at_least"))
    if fault := whole_fault(condition.get("value"), least=1):
        faults.append(at(f"{where}.value", f"count_at_least counts times: {fault}"))
    days = condition.get("within_last_days")
    if days is not None and (fault := days_fault(days)):
        faults.append(at(f"{where}.within_last_days", fault))
    return faults
