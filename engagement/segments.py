"""Segments: which accounts or users of a workspace meet every condition, and since when.

A condition is {"field": "trait:<key>" | "metric:<name>", "operator": ..., "value": ...}. Trait keys
are taken whole, dots included (`trait:am.status` reads the trait named "am.status"). Membership is
computed in SQL against the precomputed score tables and kept as SegmentMember rows: new members
get joined_at = the refresh time, members that stop matching are removed, the rest keep their
joined_at. Every join and leave is also logged as a SegmentMembershipChange, by the same
statements, and the log is purged after SEGMENT_CHANGES_RETENTION_DAYS.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from numbers import Real

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Func, Q, QuerySet, TextField
from django.db.models.fields.json import KeyTransform
from django.db.models.lookups import IsNull
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from engagement.backends import SegmentStatements, database_backend
from engagement.models import (
    AccountScore,
    Segment,
    SegmentMembershipChange,
    UserScore,
)

logger = logging.getLogger(__name__)

OPERATORS = (
    "equals",
    "not_equals",
    "contains",
    "greater_than",
    "less_than",
    "is_set",
    "is_not_set",
    "within_last_days",
)
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
_DATETIME_METRICS = ("last_seen",)
_NO_VALUE = ("is_set", "is_not_set")


# --- One trait by name -----------------------------------------------------------------------
#
# Django's `traits__<name>` lookups and KeyTransform read a name of digits as an array index
# (`"0"`, and `"2147483648"`, which PostgreSQL refuses as `jsonb -> bigint`) and `__` in a lookup
# string as a path. A trait name is one object key, whatever its characters: these two
# expressions take it as a text parameter, never as SQL or a path.

# SQLite: the value under one key, read with json_each (a JSON path cannot address every key:
# SQLite 3.40 compares quoted path labels with the stored text as it is, escapes included).
_SQLITE_KEY_ROW = "FROM json_each({json}) WHERE json_each.key = %s"


class TraitValue(KeyTransform):
    """The JSON value of the trait `name` in the JSON object column `source` (`traits -> name`).

    Compares as JSON with the usual key lookups (exact, gt, lt, isnull); for text comparisons use
    TraitText. On SQLite, like Django's KeyTransform, true, false and null read as those words.
    """

    def __init__(self, name: str, source: str) -> None:
        super().__init__(name, source)

    def as_postgresql(self, compiler, connection):
        lhs, params = compiler.compile(self.lhs)
        return f"({lhs} -> (%s)::text)", (*params, self.key_name)

    def as_sqlite(self, compiler, connection):
        lhs, params = compiler.compile(self.lhs)
        row = _SQLITE_KEY_ROW.format(json=lhs)
        sql = (
            "(SELECT CASE WHEN json_each.type IN ('true', 'false', 'null') THEN json_each.type "
            f"ELSE json_each.value END {row})"
        )
        return sql, (*params, self.key_name)


@TraitValue.register_lookup
class TraitValueIsNull(IsNull):
    """`isnull=True`: the trait is absent (a JSON null is present), on both databases."""


class TraitText(Func):
    """The trait `name` of the JSON object column `source` as text (`traits ->> name`).

    Strings without their quotes, numbers and booleans as their JSON text, objects and arrays as
    JSON text, null and an absent trait as NULL: a number or boolean matches its text on both
    databases.
    """

    output_field = TextField()

    def __init__(self, name: str, source: str) -> None:
        super().__init__(source)
        self.name = str(name)

    def as_sql(self, compiler, connection, **extra_context):
        raise NotImplementedError("TraitText supports PostgreSQL and SQLite.")

    def as_postgresql(self, compiler, connection, **extra_context):
        lhs, params = compiler.compile(self.source_expressions[0])
        return f"({lhs} ->> (%s)::text)", (*params, self.name)

    def as_sqlite(self, compiler, connection, **extra_context):
        lhs, params = compiler.compile(self.source_expressions[0])
        row = _SQLITE_KEY_ROW.format(json=lhs)
        sql = (
            "(SELECT CASE json_each.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
            f"WHEN 'null' THEN NULL ELSE CAST(json_each.value AS TEXT) END {row})"
        )
        return sql, (*params, self.name)


def accounts_admitted(accounts: QuerySet, account_filter: dict) -> QuerySet:
    """The accounts a workspace's account filter admits: each named trait (its name taken
    literally, see TraitValue) equal to the filter's value. Scoring and reads both use this."""
    for index, (name, value) in enumerate(sorted(account_filter.items())):
        alias = f"_filter_{index}"
        accounts = accounts.alias(**{alias: TraitValue(name, "traits")}).filter(**{alias: value})
    return accounts


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
        operator = condition.get("operator")
        value = condition.get("value")
        unknown = set(condition) - {"field", "operator", "value"}
        if unknown:
            errors.append(f"{where}: unknown keys {sorted(unknown)}.")
        if operator not in OPERATORS:
            errors.append(f"{where}: operator must be one of {', '.join(OPERATORS)}.")
            continue
        if not isinstance(field, str) or not field.startswith(("trait:", "metric:")):
            errors.append(f"{where}: field must be 'trait:<key>' or 'metric:<name>'.")
            continue
        field_kind, name = field.split(":", 1)
        if not name:
            errors.append(f"{where}: field needs a name after '{field_kind}:'.")
            continue
        if field_kind == "metric" and name not in metrics:
            errors.append(f"{where}: unknown metric {name!r}; use one of {', '.join(metrics)}.")
            continue
        if operator in _NO_VALUE:
            continue
        if value is None:
            errors.append(f"{where}: {operator} needs a value.")
        elif operator == "within_last_days":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                errors.append(f"{where}: within_last_days needs a whole number of days (>= 0).")
            elif field_kind == "metric" and name not in _DATETIME_METRICS:
                errors.append(f"{where}: within_last_days applies to last_seen, not {name}.")
        elif operator == "contains":
            if field_kind == "metric":
                errors.append(f"{where}: contains applies to traits, not metrics.")
            elif not isinstance(value, str) or not value:
                errors.append(f"{where}: contains needs a non-empty text value.")
        elif field_kind == "metric":
            if name in _DATETIME_METRICS:
                if operator in ("equals", "not_equals"):
                    errors.append(f"{where}: compare last_seen with greater_than or less_than.")
                elif not isinstance(value, str) or parse_datetime(value) is None:
                    errors.append(f"{where}: last_seen compares with an ISO 8601 date-time.")
            elif not _is_number(value):
                errors.append(f"{where}: {name} compares with a number.")
        elif operator in ("greater_than", "less_than") and not (
            _is_number(value) or isinstance(value, str)
        ):
            errors.append(f"{where}: {operator} compares with a number or an ISO 8601 date.")
    if errors:
        raise ValidationError(errors)
    return conditions


def _trait_q(
    queryset: QuerySet, index: int, source: str, key: str, operator: str, value, now: datetime
) -> QuerySet:
    """Filter on one trait; the trait's JSON value is compared as JSON (5 and "5" differ)."""
    alias = f"_c{index}"
    text_alias = f"_c{index}_text"
    # The text form is plain text, so that comparisons are text ones on every database.
    queryset = queryset.annotate(
        **{alias: TraitValue(key, source), text_alias: TraitText(key, source)}
    )
    present = Q(**{f"{alias}__isnull": False}) & ~Q(**{alias: None})
    if operator == "equals":
        return queryset.filter(Q(**{alias: value}))
    if operator == "not_equals":
        return queryset.filter(~present | ~Q(**{alias: value}))
    if operator == "contains":
        return queryset.filter(**{f"{text_alias}__icontains": value})
    if operator == "greater_than":
        return queryset.filter(present, Q(**{f"{alias}__gt": value}))
    if operator == "less_than":
        return queryset.filter(present, Q(**{f"{alias}__lt": value}))
    if operator == "is_set":
        return queryset.filter(present)
    if operator == "is_not_set":
        return queryset.filter(~present)
    # within_last_days: an ISO 8601 date or date-time from the start of the day N days ago
    # up to now (ISO strings of one format order as text).
    since = (now - timedelta(days=value)).date().isoformat()
    until = (now + timedelta(days=1)).date().isoformat()
    return queryset.filter(**{f"{text_alias}__gte": since, f"{text_alias}__lt": until})


def _metric_q(name: str, operator: str, value, now: datetime) -> Q:
    if name in _DATETIME_METRICS and operator in ("greater_than", "less_than"):
        value = parse_datetime(value)
        if timezone.is_naive(value):
            value = timezone.make_aware(value, timezone.get_fixed_timezone(0))
    if operator == "equals":
        return Q(**{name: value})
    if operator == "not_equals":
        return ~Q(**{name: value}) | Q(**{f"{name}__isnull": True})
    if operator == "greater_than":
        return Q(**{f"{name}__gt": value})
    if operator == "less_than":
        return Q(**{f"{name}__lt": value})
    if operator == "is_set":
        return Q(**{f"{name}__isnull": False})
    if operator == "is_not_set":
        return Q(**{f"{name}__isnull": True})
    if operator == "within_last_days":
        return Q(**{f"{name}__gte": now - timedelta(days=value), f"{name}__lte": now})
    raise ValueError(f"operator {operator!r} does not apply to metrics")


def segment_matching(*, segment: Segment, now: datetime | None = None) -> QuerySet:
    """Score rows of the segment's workspace that meet every condition."""
    return score_rows_matching(
        workspace_id=segment.workspace_id,
        target=segment.target,
        conditions=segment.conditions,
        now=now,
    )


def score_rows_matching(
    *,
    workspace_id: int,
    target: str,
    conditions: object,
    match: str = "all",
    now: datetime | None = None,
    queryset: QuerySet | None = None,
) -> QuerySet:
    """The workspace's user or account score rows (or those of `queryset`) that meet every
    condition (`match="all"`) or at least one (`"any"`; no conditions: every row)."""
    now = now or timezone.now()
    if queryset is None:
        model = UserScore if target == Segment.Target.USERS else AccountScore
        queryset = model.objects.filter(workspace_id=workspace_id)
    source = "user__traits" if target == Segment.Target.USERS else "account__traits"
    conditions = segment_conditions_validate(target=target, conditions=conditions)
    if match == "any" and conditions:
        matching = Q(pk__in=[])
        for index, condition in enumerate(conditions):
            applied = _condition_applied(queryset, index, source, condition, now)
            matching |= Q(pk__in=applied.values("pk"))
        return queryset.filter(matching)
    for index, condition in enumerate(conditions):
        queryset = _condition_applied(queryset, index, source, condition, now)
    return queryset


def _condition_applied(
    queryset: QuerySet, index: int, source: str, condition: dict, now: datetime
) -> QuerySet:
    field_kind, name = condition["field"].split(":", 1)
    operator, value = condition["operator"], condition.get("value")
    if field_kind == "trait":
        return _trait_q(queryset, index, source, name, operator, value, now)
    return queryset.filter(_metric_q(name, operator, value, now))


# The SQL below is assembled from fixed table and column names; the matching subquery is the
# ORM's and every value is a parameter. The backend (engagement/backends) assembles the leaves
# and joins from these FROM clauses, each with its log entry.
_MEMBERS = "engagement_segmentmember"
_CHANGES = "engagement_segmentmembershipchange"
_GONE = """FROM {members} m WHERE m.segment_id = %s
    AND NOT EXISTS (SELECT 1 FROM ({matching}) q WHERE q.{column} = m.{column})"""
_NEW = """FROM ({matching}) q WHERE NOT EXISTS (
    SELECT 1 FROM {members} x WHERE x.segment_id = %s AND x.{column} = q.{column})"""


def segment_refresh(*, segment: Segment, now: datetime | None = None) -> tuple[int, int]:
    """Bring one segment's members up to date and log who joined and who left; returns
    (joined, left)."""
    now = now or timezone.now()
    column = "user_id" if segment.target == Segment.Target.USERS else "account_id"
    try:
        matching = segment_matching(segment=segment, now=now).values(column)
    except ValidationError as exc:
        logger.warning("segment %s has invalid conditions, skipped: %s", segment.id, exc)
        return 0, 0
    sql, params = matching.query.sql_with_params()
    names = {
        "members": _MEMBERS,
        "changes": _CHANGES,
        "column": column,
        "other": "account_id" if column == "user_id" else "user_id",
    }
    statements = SegmentStatements(
        names=names,
        gone=_GONE.format(matching=sql, **names),
        new=_NEW.format(matching=sql, **names),
        segment_id=segment.id,
        at=connection.ops.adapt_datetimefield_value(now),
        leave_params=[segment.id, *params],
        join_params=[*params, segment.id],
    )
    with transaction.atomic():
        return database_backend().segment_members_update(statements)


def segment_changes_purge(*, now: datetime | None = None) -> int:
    """Forget joins and leaves older than SEGMENT_CHANGES_RETENTION_DAYS; returns how many."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.SEGMENT_CHANGES_RETENTION_DAYS)
    deleted = 0
    # Segment by segment, so each delete reads the (segment, at) index, not the whole log.
    for segment_id in Segment.objects.order_by("id").values_list("id", flat=True):
        count, _ = SegmentMembershipChange.objects.filter(
            segment_id=segment_id, at__lt=cutoff
        ).delete()
        deleted += count
    return deleted


def segments_refresh(*, workspace_id: int, now: datetime | None = None) -> None:
    """Refresh every segment of a workspace (after each score refresh)."""
    for segment in Segment.objects.filter(workspace_id=workspace_id).order_by("id"):
        segment_refresh(segment=segment, now=now)
