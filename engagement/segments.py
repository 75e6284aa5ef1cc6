"""Segments: which accounts or users of a workspace meet every condition (or any), and since when.

A condition is {"field": "trait:<key>" | "metric:<name>", "operator": ..., "value": ...}. Trait keys
are taken whole, dots included (`trait:am.status` reads the trait named "am.status"). A group,
{"any": [conditions]}, holds when one of its conditions does. An event
condition, {"field": "event:<name>", "operator": "count_at_least", "value": N,
"within_last_days": D}, holds when the subject sent the event N times or more in the days from
the start of the day D days ago (UTC) to now, or ever without D; it is counted from the daily
rollups, never from raw events. Membership is
computed in SQL against the precomputed score tables and kept as SegmentMember rows: new members
get joined_at = the refresh time, members that stop matching are removed, the rest keep their
joined_at. Every join and leave is also logged as a SegmentMembershipChange, by the same
statements, and the log is purged after SEGMENT_CHANGES_RETENTION_DAYS.

No stored conditions stop a refresh. A segment whose conditions cannot be evaluated (refused by
engagement/segment_conditions, unreadable JSON, a date or number the query cannot be built or
run with: whatever was written past the checks, or by an older release) is marked broken with
the reason, keeps the members of its last good refresh, and is skipped; every other segment and
score moves on, and the first refresh that evaluates it again clears the mark.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import UTC, date, datetime, time, timedelta
from typing import cast

from django.conf import settings
from django.core.exceptions import EmptyResultSet, ValidationError
from django.db import DataError, IntegrityError, OperationalError, connection, models, transaction
from django.db.models import Q, QuerySet, Sum
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from engagement.backends import SegmentStatements, database_backend
from engagement.hierarchy import lineage_query, product_has_hierarchy
from engagement.models import (
    AccountScore,
    EventRollup,
    Segment,
    SegmentMembershipChange,
    UserScore,
    Workspace,
)
from engagement.segment_conditions import (
    DATETIME_METRICS,
    GROUP_KEY,
    is_group,
    segment_conditions_validate,
)
from engagement.stored_json import json_for_reading, with_json_as_text
from engagement.traits import TraitText, TraitValue

logger = logging.getLogger(__name__)


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
            # Imported here: the scoring package imports this module (segments_refresh).
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


# The SQL below is assembled from fixed table and column names; the matching subquery is the
# ORM's and every value is a parameter. The backend (engagement/backends) assembles the leaves
# and joins from these FROM clauses, each with its log entry.
_MEMBERS = "engagement_segmentmember"
_CHANGES = "engagement_segmentmembershipchange"
_GONE = """FROM {members} m WHERE m.segment_id = %s {among}
    AND NOT EXISTS (SELECT 1 FROM {matching} q WHERE q.{column} = m.{column})"""
_NEW = """FROM {matching} q WHERE NOT EXISTS (
    SELECT 1 FROM {members} x WHERE x.segment_id = %s AND x.{column} = q.{column})"""
# The name the same clauses read the matching rows by, for a backend that works them out once
# for both (SegmentStatements.matching).
_MATCHING = "matching"


def segment_refresh(
    *, segment: Segment, now: datetime | None = None, among: Collection[int] | None = None
) -> tuple[int, int]:
    """Bring one segment's members up to date and log who joined and who left; returns
    (joined, left). With `among` (user or account ids, by the segment's target), only those
    subjects can join or leave: the others' rows did not change since the last refresh.

    A segment whose conditions cannot be evaluated is marked broken instead (its members are
    left as they were): see the module docstring. Its statements run in a savepoint, so the
    caller's transaction (a score refresh) goes on after the database refused them."""
    now = now or timezone.now()
    if among is None:
        return _segment_refresh(segment, now, None)
    if not among:
        return 0, 0
    with transaction.atomic(), _AmongTables({_target_of(segment): among}) as tables:
        return _segment_refresh(segment, now, tables.name(_target_of(segment)))


def _segment_refresh(segment: Segment, now: datetime, among_table: str | None) -> tuple[int, int]:
    """segment_refresh, among the ids of `among_table` (None: every subject)."""
    try:
        statements = _statements(segment, now, among_table)
    except SegmentUnevaluable as unevaluable:
        _broken_mark(segment, str(unevaluable), now)
        return 0, 0
    try:
        try:
            return _members_update(segment, statements, now)
        except IntegrityError:
            # A concurrent refresh of this segment committed some of the same new members
            # first: everything this one did was rolled back with its (sub)transaction; once
            # more, skipping those members.
            return _members_update(segment, statements, now, skip_added_meanwhile=True)
    except _REFUSED_BY_DATABASE as refused:
        said = str(refused).strip().splitlines()
        detail = said[0] if said else type(refused).__name__
        _broken_mark(segment, f"the database could not evaluate the conditions: {detail}", now)
        return 0, 0


def _target_of(segment: Segment) -> str:
    return "user" if segment.target == Segment.Target.USERS else "account"


class _AmongTables:
    """The ids a refresh compares segments among, one temporary table per target (`id`),
    written once for all of the workspace's segments and dropped at the end. As a list, each
    segment's statement carried the ids twice as parameters (2,800 for 1,400 changed
    accounts), and binding and parsing them cost each segment more than its comparison: 11
    segments 236-245 ms of a 0.78 s refresh at a million users, 5-13 ms of it the comparisons
    (docs/benchmarks.md). Must be used inside a transaction (PostgreSQL drops such a table
    at commit)."""

    def __init__(self, ids_by_target: dict[str, Collection[int]]) -> None:
        self._ids = ids_by_target
        self._written: list[str] = []

    def __enter__(self) -> _AmongTables:
        return self

    def name(self, target: str) -> str:
        """The target's table, written on first use."""
        table = f"eds_t_segment_among_{target}"
        if table not in self._written:
            backend = database_backend()
            ids = sorted(self._ids[target])
            with connection.cursor() as cursor:
                cursor.execute(f"DROP TABLE IF EXISTS {table}")
                backend.temp_table_create(cursor, table, "id BIGINT PRIMARY KEY")
                for start in range(0, len(ids), backend.bulk_rows):
                    source, params = backend.bulk_source(
                        [models.BigIntegerField()],
                        [(i,) for i in ids[start : start + backend.bulk_rows]],
                    )
                    insert = f"INSERT INTO {table} (id) SELECT c0 FROM {source} AS ids"  # noqa: S608
                    cursor.execute(insert, params)
                backend.temp_tables_analyze(cursor, [table])
            self._written.append(table)
        return table

    def __exit__(self, error_type: type[BaseException] | None, *rest: object) -> None:
        # After an error the transaction around (rolled back) takes the tables with it.
        if error_type is None and self._written:
            with connection.cursor() as cursor:
                for table in self._written:
                    cursor.execute(f"DROP TABLE IF EXISTS {table}")


# What a segment's statements may raise for the values of its conditions: a value the database
# refuses (DataError: out of range, a time zone it does not know), a statement it cannot plan or
# finish (OperationalError: too deep, too long), an integer SQLite cannot bind (OverflowError).
# IntegrityError (a concurrent refresh) is handled above; the rest propagates.
_REFUSED_BY_DATABASE = (DataError, OperationalError, OverflowError)
# What building a segment's query may raise for the values of its conditions (dates beyond year
# 9999, numbers beyond a C integer, a condition nested beyond Python's recursion; EmptyResultSet:
# Django found a value no row of the column can hold, and gives up on the query).
_UNBUILDABLE = (
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
CONDITIONS_UNEVALUABLE = (*_UNBUILDABLE, *_REFUSED_BY_DATABASE)
# A broken segment's reason is shown whole on its page; past this it is cut.
BROKEN_REASON_MAX = 2000


class SegmentUnevaluable(Exception):
    """Why a segment's conditions cannot be evaluated, as a person reads it."""


def _statements(segment: Segment, now: datetime, among_table: str | None) -> SegmentStatements:
    """The segment's refresh statements, among the ids of `among_table` (None: every
    subject), or SegmentUnevaluable."""
    column = "user_id" if segment.target == Segment.Target.USERS else "account_id"
    among_sql = ""
    try:
        matching = segment_matching(segment=segment, now=now).values(column)
        if among_table is not None:
            among = f"SELECT id FROM {among_table}"  # noqa: S608 (a fixed name)
            matching = matching.filter(**{f"{column}__in": RawSQL(among, [])})  # noqa: S611
            among_sql = f"AND m.{column} IN ({among})"
        sql, params = matching.query.sql_with_params()
    except ValidationError as invalid:
        raise SegmentUnevaluable("; ".join(invalid.messages)) from invalid
    except _UNBUILDABLE as error:
        raise SegmentUnevaluable(_unbuildable_reason(segment, now, error)) from error
    names = {
        "members": _MEMBERS,
        "changes": _CHANGES,
        "column": column,
        "other": "account_id" if column == "user_id" else "user_id",
    }
    return SegmentStatements(
        names=names,
        gone=_GONE.format(matching=f"({sql})", among=among_sql, **names),
        new=_NEW.format(matching=f"({sql})", **names),
        segment_id=segment.id,
        at=connection.ops.adapt_datetimefield_value(now),
        leave_params=[segment.id, *params],
        join_params=[*params, segment.id],
        whole=among_table is None,
        matching=sql,
        matching_params=list(params),
        gone_from_matching=_GONE.format(matching=_MATCHING, among=among_sql, **names),
        new_from_matching=_NEW.format(matching=_MATCHING, **names),
    )


def _unbuildable_reason(segment: Segment, now: datetime, error: BaseException) -> str:
    """Why the segment's query could not be built, after the first condition that fails on its
    own (`conditions[2]: ...`), as conditions are numbered in their JSON."""
    conditions = segment.conditions if isinstance(segment.conditions, list) else []
    for position, condition in enumerate(conditions):
        try:
            score_rows_matching(
                workspace_id=segment.workspace_id,
                target=segment.target,
                conditions=[condition],
                now=now,
            ).query.sql_with_params()
        except _UNBUILDABLE as own:
            return f"conditions[{position}]: cannot be evaluated: {_described(own)}"
        except ValidationError:
            continue
    return f"the conditions cannot be evaluated: {_described(error)}"


def unevaluable_described(error: BaseException) -> str:
    """Why stored conditions could not be evaluated, as a person reads it."""
    return _described(error)


def _described(error: BaseException) -> str:
    if isinstance(error, EmptyResultSet):
        return "it compares with a value no stored row can hold"
    if isinstance(error, RecursionError):
        return "it is nested too deeply"
    if isinstance(error, OverflowError):
        return f"a date or number beyond what can be computed ({error})"
    return str(error) or type(error).__name__


def _broken_mark(segment: Segment, reason: str, now: datetime) -> None:
    """Mark the segment broken with `reason`, since `now` unless it was broken for the same
    reason already; its members stay as they were."""
    reason = reason[:BROKEN_REASON_MAX]
    logger.warning("segment %s cannot be evaluated, skipped: %s", segment.id, reason)
    Segment.objects.filter(id=segment.id).exclude(broken_reason=reason).update(
        broken_reason=reason, broken_at=now
    )
    segment.broken_reason = reason


def _members_update(
    segment: Segment,
    statements: SegmentStatements,
    now: datetime,
    *,
    skip_added_meanwhile: bool = False,
) -> tuple[int, int]:
    with transaction.atomic():
        changed = database_backend().segment_members_update(
            statements, skip_added_meanwhile=skip_added_meanwhile
        )
        # Not save(): updated_at tells when the conditions changed, and stays. Evaluated: no
        # longer broken, if it was.
        Segment.objects.filter(id=segment.id).update(
            members_refreshed_at=now, broken_reason="", broken_at=None
        )
    segment.broken_reason = ""
    return changed


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


# An incremental refresh that rewrote more subjects than this compares whole segments: one
# anti-join over the segment beats a list of ids that long.
SEGMENT_REFRESH_AMONG_MAX = 5000


def segments_refresh(
    *,
    workspace_id: int,
    now: datetime | None = None,
    user_ids: Collection[int] | None = None,
    account_ids: Collection[int] | None = None,
) -> None:
    """Refresh every segment of a workspace (after each score refresh).

    After an incremental refresh, `user_ids` and `account_ids` are the subjects whose score rows
    (values, traits, rollups) it may have changed, and only they can join or leave: within a UTC
    day a condition's verdict moves only with the row it reads (day-based conditions move at
    midnight, when a full rescore refreshes every segment whole). The exception is the
    percentile rank, which moves for rows the refresh did not rewrite: segments reading it are
    compared whole. None (a full rescore): every segment is compared whole.
    """
    now = now or timezone.now()
    segments = with_json_as_text(Segment.objects.filter(workspace_id=workspace_id), "conditions")
    among_ids = {"user": user_ids, "account": account_ids}
    with transaction.atomic(), _AmongTables(among_ids) as tables:  # type: ignore[arg-type]
        for segment in segments.order_by("id"):
            # Read as the read API renders them: a value nested beyond what json.loads reads,
            # or a number with more digits than Python converts, becomes its text, and is
            # refused as a condition's value, instead of failing the refresh.
            segment.conditions = json_for_reading(segment.conditions_json)
            target = _target_of(segment)
            among = among_ids[target]
            if among is None or not _refreshable_among(segment, among, now):
                _segment_refresh(segment, now, None)
            elif among:
                _segment_refresh(segment, now, tables.name(target))


def _refreshable_among(segment: Segment, among: Collection[int], now: datetime) -> bool:
    """Whether only `among` can have joined or left since the segment's last refresh: its
    members were brought up to date with its current conditions earlier the same UTC day (and
    it is not broken: its members may be from before), it does not read the percentile rank,
    and `among` is short enough."""
    refreshed = segment.members_refreshed_at
    return (
        not segment.broken_reason
        and refreshed is not None
        and refreshed >= segment.updated_at
        and refreshed.astimezone(UTC).date() == now.astimezone(UTC).date()
        and len(among) <= SEGMENT_REFRESH_AMONG_MAX
        and not _reads_ranks(segment)
    )


def _reads_ranks(segment: Segment) -> bool:
    conditions = segment.conditions if isinstance(segment.conditions, list) else []
    flat = []
    for condition in conditions:
        inner = condition.get(GROUP_KEY) if is_group(condition) else [condition]
        flat += inner if isinstance(inner, list) else []
    return any(
        isinstance(condition, dict) and condition.get("field") == "metric:percentile_rank"
        for condition in flat
    )
