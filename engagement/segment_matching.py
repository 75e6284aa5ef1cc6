"""Which score rows of a workspace meet a segment's conditions: the condition language
(engagement/segment_conditions checks it) turned into a query over the precomputed user or
account scores, for segments (engagement/segments keeps their members), automations' conditions
and the dashboard's lists.

A condition is {"field": "trait:<key>" | "metric:<name>", "operator": ..., "value": ...}. Trait keys
are taken whole, dots included (`trait:am.status` reads the trait named "am.status"). A group,
{"any": [conditions]}, holds when one of its conditions does. An event
condition, {"field": "event:<name>", "operator": "count_at_least", "value": N,
"within_last_days": D}, holds when the subject sent the event N times or more in the days from
the start of the day D days ago (UTC) to now, or ever without D; it is counted from the daily
rollups, never from raw events.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import cast

from django.core.exceptions import EmptyResultSet
from django.db import DataError, OperationalError
from django.db.models import Q, QuerySet, Sum
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from engagement.hierarchy import lineage_query, product_has_hierarchy
from engagement.models import AccountScore, EventRollup, Segment, UserScore, Workspace
from engagement.segment_conditions import (
    DATETIME_METRICS,
    GROUP_KEY,
    is_group,
    segment_conditions_validate,
)
from engagement.traits import TraitText, TraitValue

# What a segment's statements may raise for the values of its conditions: a value the database
# refuses (DataError: out of range, a time zone it does not know), a statement it cannot plan or
# finish (OperationalError: too deep, too long), an integer SQLite cannot bind (OverflowError).
# IntegrityError (a concurrent refresh) is engagement.segments'; the rest propagates.
CONDITIONS_REFUSED = (DataError, OperationalError, OverflowError)
# What building a segment's query may raise for the values of its conditions (dates beyond year
# 9999, numbers beyond a C integer, a condition nested beyond Python's recursion; EmptyResultSet:
# Django found a value no row of the column can hold, and gives up on the query).
CONDITIONS_UNBUILDABLE = (
    EmptyResultSet,
    ArithmeticError,
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    RecursionError,
)
# What evaluating stored conditions may raise for their values alone, whoever evaluates them (a
# segment's refresh, an automation's conditions): a caller skips what raised one of these and
# says why, and the refresh around it carries on.
CONDITIONS_UNEVALUABLE = (*CONDITIONS_UNBUILDABLE, *CONDITIONS_REFUSED)


def unevaluable_described(error: BaseException) -> str:
    """Why stored conditions could not be evaluated, as a person reads it."""
    if isinstance(error, EmptyResultSet):
        return "it compares with a value no stored row can hold"
    if isinstance(error, RecursionError):
        return "it is nested too deeply"
    if isinstance(error, OverflowError):
        return f"a date or number beyond what can be computed ({error})"
    return str(error) or type(error).__name__


def _trait_q(
    queryset: QuerySet, index: int | str, source: str, key: str, operator: str, value, now: datetime
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
    if operator == "within_next_days":
        # After today, up to the end of the day N days ahead (UTC): today is within_last_days 0.
        tomorrow = (now + timedelta(days=1)).date().isoformat()
        after = (now + timedelta(days=value + 1)).date().isoformat()
        return queryset.filter(**{f"{text_alias}__gte": tomorrow, f"{text_alias}__lt": after})
    # within_last_days: an ISO 8601 date or date-time from the start of the day N days ago
    # up to now (ISO strings of one format order as text); more_than_days_ago: before that day.
    since = (now - timedelta(days=value)).date().isoformat()
    if operator == "more_than_days_ago":
        return queryset.filter(present, **{f"{text_alias}__lt": since})
    until = (now + timedelta(days=1)).date().isoformat()
    return queryset.filter(**{f"{text_alias}__gte": since, f"{text_alias}__lt": until})


def _metric_q(name: str, operator: str, value, subject: _Subject) -> Q:
    if name == "percentile_rank":
        return _rank_q(operator, value, subject.percentile_ranks)
    now = subject.now
    if name in DATETIME_METRICS and operator in ("greater_than", "less_than"):
        value = parse_datetime(value)
        if timezone.is_naive(value):
            value = value.replace(tzinfo=UTC)
        # In UTC: PostgreSQL takes offsets up to 15:59 only, parse_datetime up to 23:59.
        value = value.astimezone(UTC)
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
    if operator in ("within_last_days", "more_than_days_ago"):
        # Day by day (UTC), as for traits: from (or before) the start of the day N days ago, up
        # to the end of today, so that within a UTC day a row's membership moves only when its
        # values do (the incremental segment refresh relies on it).
        since = datetime.combine((now - timedelta(days=value)).date(), time.min, tzinfo=UTC)
        if operator == "more_than_days_ago":
            return Q(**{f"{name}__lt": since})
        tomorrow = datetime.combine((now + timedelta(days=1)).date(), time.min, tzinfo=UTC)
        return Q(**{f"{name}__gte": since, f"{name}__lt": tomorrow})
    raise ValueError(f"operator {operator!r} does not apply to metrics")


def _rank_q(operator: str, value, ranks: tuple[float | None, ...]) -> Q:
    """A condition on the percentile rank as the scores whose rank meets it: a rank is a
    function of the score (formula.percentile_ranks), so this is exact. A score of 0 has no
    rank: it meets is_not_set and not_equals, as a NULL column did."""
    if operator in ("is_set", "is_not_set"):
        unranked = Q(engagement_score=0)
        return ~unranked if operator == "is_set" else unranked
    compared = {
        "equals": lambda rank: rank == value,
        "not_equals": lambda rank: rank != value,
        "greater_than": lambda rank: rank > value,
        "less_than": lambda rank: rank < value,
    }
    if operator not in compared:
        raise ValueError(f"operator {operator!r} does not apply to the percentile rank")
    meets = compared[operator]
    scores = [score for score, rank in enumerate(ranks) if rank is not None and meets(rank)]
    if operator == "not_equals":
        scores.append(0)
    return Q(engagement_score__in=scores)


def segment_matching(*, segment: Segment, now: datetime | None = None) -> QuerySet:
    """Score rows of the segment's workspace that meet its conditions (all or any)."""
    return score_rows_matching(
        workspace_id=segment.workspace_id,
        target=segment.target,
        conditions=segment.conditions,
        match=segment.match,
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
    conditions = segment_conditions_validate(target=target, conditions=conditions)
    subject = _Subject(workspace_id, target, now)
    if match == Segment.Match.ANY and conditions:
        matching = Q(pk__in=[])
        for index, condition in enumerate(conditions):
            applied = _condition_applied(queryset, index, subject, condition)
            matching |= Q(pk__in=applied.values("pk"))
        return queryset.filter(matching)
    for index, condition in enumerate(conditions):
        queryset = _condition_applied(queryset, index, subject, condition)
    return queryset


class _Subject:
    """What conditions on one workspace's users or accounts read: the trait column, the key
    column and, for event conditions, the workspace's product."""

    def __init__(self, workspace_id: int, target: str, now: datetime) -> None:
        self.workspace_id, self.now = workspace_id, now
        self.key = "user_id" if target == Segment.Target.USERS else "account_id"
        self.traits = "user__traits" if target == Segment.Target.USERS else "account__traits"
        self._product_id: int | None = None
        self._ranks: tuple[float | None, ...] | None = None

    @property
    def percentile_ranks(self) -> tuple[float | None, ...]:
        """The rank of each score 0-100, from the score rows as they are now (a segment is
        refreshed inside the refresh's transaction, before the workspace's state is saved)."""
        if self._ranks is None:
            # Imported here: the scoring package imports this module (through segments_refresh).
            from engagement.scoring.ranks import workspace_percentile_ranks

            kind = "user" if self.key == "user_id" else "account"
            self._ranks = workspace_percentile_ranks(self.workspace_id, kind, counted=True)
        return self._ranks

    @property
    def product_id(self) -> int:
        if self._product_id is None:
            self._product_id = Workspace.objects.values_list("product_id", flat=True).get(
                id=self.workspace_id
            )
        return self._product_id


def _condition_applied(
    queryset: QuerySet, index: int | str, subject: _Subject, condition: dict
) -> QuerySet:
    if is_group(condition):
        return queryset.filter(_group_q(queryset, index, subject, condition[GROUP_KEY]))
    field_kind, name = condition["field"].split(":", 1)
    # A stored condition passed segment_conditions' checks: an event's value is its count.
    operator, value = condition["operator"], condition.get("value")
    if field_kind == "trait":
        return _trait_q(queryset, index, subject.traits, name, operator, value, subject.now)
    if field_kind == "event":
        days = condition.get("within_last_days")
        return queryset.filter(_event_q(subject, name, cast(int, value), days))
    return queryset.filter(_metric_q(name, operator, value, subject))


def _group_q(queryset: QuerySet, index: int | str, subject: _Subject, conditions: list) -> Q:
    """At least one of a group's conditions: metric and event conditions as one OR of their
    filters on the score row; a trait condition (which annotates the row) as the rows of
    `queryset` it admits."""
    matching = Q(pk__in=[])
    for position, condition in enumerate(conditions):
        field_kind, name = condition["field"].split(":", 1)
        operator, value = condition["operator"], condition.get("value")
        if field_kind == "metric":
            matching |= _metric_q(name, operator, value, subject)
        elif field_kind == "event":
            matching |= _event_q(subject, name, value, condition.get("within_last_days"))
        else:
            # Its own alias (_c3_0), apart from the top-level conditions' (_c3).
            applied = _trait_q(
                queryset, f"{index}_{position}", subject.traits, name, operator, value, subject.now
            )
            matching |= Q(pk__in=applied.values("pk"))
    return matching


def _event_q(subject: _Subject, name: str, times: int, days: int | None) -> Q:
    """Subjects that sent `name` `times` times or more, counted from the daily rollups: since
    the start of the day `days` days ago (UTC), or ever. A user's rollups are every event they
    sent; an account's are the events that counted for it (in a hierarchy, for it or any of its
    descendants)."""
    since = (subject.now - timedelta(days=days)).date() if days is not None else None
    if subject.key == "account_id" and product_has_hierarchy(subject.product_id):
        return Q(account_id__in=_rolled_up_event_counts(subject.product_id, name, times, since))
    rollups = EventRollup.objects.filter(product_id=subject.product_id, event_name=name)
    if subject.key == "account_id":
        rollups = rollups.filter(account_id__isnull=False)
    if since is not None:
        rollups = rollups.filter(day__gte=since)
    counted = (
        rollups.values(subject.key)
        .annotate(times=Sum("count"))
        .filter(times__gte=times)
        .values(subject.key)
    )
    return Q(**{f"{subject.key}__in": counted})


def _rolled_up_event_counts(product_id: int, name: str, times: int, since: date | None) -> RawSQL:
    """The accounts whose events and descendants' events of `name` (since the day `since`)
    number `times` or more: the rollups summed up the lineage of engagement/hierarchy."""
    day = "" if since is None else "AND r.day >= %s"
    params = [product_id, product_id, name] + ([] if since is None else [since]) + [times]
    return RawSQL(  # noqa: S611 (fixed names; every value a parameter)
        f"""
        SELECT h.ancestor_id FROM ({lineage_query("%s")}) h
        JOIN engagement_eventrollup r ON r.account_id = h.account_id
        WHERE r.product_id = %s AND r.event_name = %s {day}
        GROUP BY h.ancestor_id HAVING SUM(r.count) >= %s
        """,  # noqa: S608
        params,
    )
