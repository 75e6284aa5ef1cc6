"""Segments: which accounts or users of a workspace meet every condition (or any), and since when.

Which score rows meet the conditions is engagement/segment_matching's (the condition language
is described there). Membership is computed in SQL against the precomputed score tables and
kept as SegmentMember rows: new members get joined_at = the refresh time, members that stop
matching are removed, the rest keep their joined_at. Every join and leave is also logged as a
SegmentMembershipChange, by the same statements, and the log is purged after
SEGMENT_CHANGES_RETENTION_DAYS.

No stored conditions stop a refresh. A segment whose conditions cannot be evaluated (refused by
engagement/segment_conditions, unreadable JSON, a date or number the query cannot be built or
run with: whatever was written past the checks, or by an older release) is marked broken with
the reason, keeps the members of its last good refresh, and is skipped; every other segment and
score moves on, and the first refresh that evaluates it again clears the mark.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, models, transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone

from engagement.backends import SegmentStatements, database_backend
from engagement.models import (
    Segment,
    SegmentMembershipChange,
)
from engagement.segment_conditions import GROUP_KEY, is_group
from engagement.segment_matching import (
    CONDITIONS_REFUSED,
    CONDITIONS_UNBUILDABLE,
    score_rows_matching,
    segment_matching,
    unevaluable_described,
)
from engagement.stored_json import json_for_reading, with_json_as_text

logger = logging.getLogger(__name__)


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
    except CONDITIONS_REFUSED as refused:
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
    except CONDITIONS_UNBUILDABLE as error:
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
        except CONDITIONS_UNBUILDABLE as own:
            return f"conditions[{position}]: cannot be evaluated: {unevaluable_described(own)}"
        except ValidationError:
            continue
    return f"the conditions cannot be evaluated: {unevaluable_described(error)}"


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
