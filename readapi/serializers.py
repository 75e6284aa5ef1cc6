"""Records of the read API (output) and the query parameters each endpoint accepts (input).

Serializer context: `links` (readapi.links.Links, which builds `_links` from route names),
`workspace` (the workspace the metrics belong to), `expand` (set of names) and `segments`
({account or user id: [SegmentMember]}).

One format for every record (docs/read-api.md "Record format"): times are `timestamp()` text,
whole-number metrics integers, shares and ranks rounded by `rounded_fraction`, unknown values null.
"""

import math
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from engagement.models import Account, User
from engagement.scoring import tenure_days
from engagement.selectors import (
    USER_MATCH_TYPES,
    read_account_filter,
    read_conditions,
    read_traits,
    score_computed_at,
)
from readapi.pagination import DEFAULT_LIMIT, MAX_LIMIT


def _link(context: dict, route: str, ident: int | None = None, **query: int) -> str:
    return context["links"].url(route, ident, **query)


# --- Shared pieces ----------------------------------------------------------------------------


def timestamp(value: datetime | None) -> str | None:
    """A time as every read API field carries it: ISO 8601 in UTC with microseconds,
    `2026-11-23T10:15:00.123456Z` (a naive time is taken as UTC)."""
    if value is None:
        return None
    value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return f"{value.replace(tzinfo=None).isoformat(timespec='microseconds')}Z"


class TimestampField(serializers.DateTimeField):
    """A date-time field rendered by `timestamp()`."""

    def to_representation(self, value: datetime | None) -> str | None:
        return timestamp(value)


def _finite(value: object) -> float | None:
    """A stored number as JSON can carry it: NaN and infinities (PostgreSQL stores them), and
    anything that is not a number, as null."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond a double, in an old breakdown
        return None
    return number if math.isfinite(number) else None


def whole_number(value: object) -> int | None:
    """A metric the formula makes a whole number (weights and counts are whole), as an integer;
    a stored fraction (an import) rounds half up."""
    number = _finite(value)
    return None if number is None else math.floor(number + 0.5)


def rounded_fraction(value: object, places: int) -> float | None:
    """A fraction rounded half up to `places` decimals, as its shortest decimal text reads."""
    number = _finite(value)
    if number is None:
        return None
    exact = Decimal(repr(number)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return float(exact)


RANK_DECIMALS = 1  # percentile_rank
SHARE_DECIMALS = 4  # adoption, active_user_share


class _ReadWith:
    """A field whose value is `read(instance)`: a JSON column as the read selectors render it
    (they load it as text, so it is never decoded on the way, see engagement.selectors)."""

    def __init__(self, *args, read, **kwargs) -> None:
        self.read = read
        super().__init__(*args, **kwargs)

    def get_attribute(self, instance):
        return self.read(instance)


class ReadDictField(_ReadWith, serializers.DictField):
    pass


class ReadListField(_ReadWith, serializers.ListField):
    pass


class BreakdownItemSerializer(serializers.Serializer):
    event = serializers.CharField()
    count = serializers.IntegerField()
    weight = serializers.IntegerField()
    points = serializers.IntegerField(allow_null=True, help_text="count x weight.")


class EventWeightSerializer(serializers.Serializer):
    event = serializers.CharField(source="event_name")
    weight = serializers.IntegerField()


class RecordLinksSerializer(serializers.Serializer):
    self = serializers.URLField()
    workspace = serializers.URLField(required=False)
    accounts = serializers.URLField(required=False)
    users = serializers.URLField(required=False)
    segments = serializers.URLField(required=False)
    members = serializers.URLField(required=False)


class SegmentRefSerializer(serializers.Serializer):
    """A segment an account or user is in, and since when."""

    id = serializers.IntegerField(source="segment_id")
    name = serializers.CharField(source="segment.name")
    joined_at = TimestampField()
    _links = serializers.SerializerMethodField()

    @extend_schema_field(RecordLinksSerializer)
    def get__links(self, member) -> dict:
        return {"self": _link(self.context, "read-segment", member.segment_id)}


# --- Workspaces -------------------------------------------------------------------------------


class WorkspaceStatsSerializer(serializers.Serializer):
    users = serializers.IntegerField()
    accounts = serializers.IntegerField()


class WorkspaceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    lookback_days = serializers.IntegerField()
    daily_event_cap = serializers.IntegerField(allow_null=True)
    account_filter = ReadDictField(read=read_account_filter)
    event_weights = EventWeightSerializer(source="weights.all", many=True)
    created_at = TimestampField()
    updated_at = TimestampField()
    stats = serializers.SerializerMethodField(help_text="With expand=stats only.")
    _links = serializers.SerializerMethodField()

    @extend_schema_field(RecordLinksSerializer)
    def get__links(self, workspace) -> dict:
        return {
            "self": _link(self.context, "read-workspace", workspace.id),
            "accounts": _link(self.context, "read-accounts", workspace_id=workspace.id),
            "users": _link(self.context, "read-users", workspace_id=workspace.id),
            "segments": _link(self.context, "read-segments", workspace_id=workspace.id),
        }

    @extend_schema_field(WorkspaceStatsSerializer)
    def get_stats(self, workspace) -> dict:
        stats = self.context["stats"]
        return {"users": stats.users, "accounts": stats.accounts}

    def to_representation(self, workspace) -> dict:
        if self.context.get("stats") is None:
            self.fields.pop("stats", None)
        return super().to_representation(workspace)


# --- Accounts and users -----------------------------------------------------------------------


def _breakdown(items: list) -> list[dict]:
    return [
        {
            "event": item.get("event"),
            "count": item.get("count", 0),
            "weight": item.get("weight", 0),
            "points": whole_number(item.get("points", 0)),
        }
        for item in items or []
    ]


class ScoredRecordSerializer(serializers.Serializer):
    """The metrics accounts and users both carry; the instance is their score row.

    Records are built directly (`to_representation`) rather than field by field: a page of 100
    records is on every list request's hot path and DRF's per-field machinery costs more than the
    queries behind it. The declared fields document the record for the OpenAPI schema, and a test
    checks that both say the same.
    """

    workspace_id = serializers.IntegerField()
    engagement_score = serializers.IntegerField(help_text="0-100 in this workspace.")
    score_change = serializers.IntegerField(help_text="Now minus one lookback period earlier.")
    previous_score = serializers.IntegerField(help_text="The score one lookback period earlier.")
    percentile_rank = serializers.FloatField(
        allow_null=True, help_text="0-100 within the workspace, one decimal."
    )
    raw_score = serializers.IntegerField(
        allow_null=True, help_text="Sum of event weights in the window."
    )
    previous_raw_score = serializers.IntegerField(
        allow_null=True, help_text="The raw score of the window one lookback period earlier."
    )
    active_days = serializers.IntegerField()
    adoption = serializers.FloatField(
        allow_null=True, help_text="Share (0-1) of weighted event names used, four decimals."
    )
    events_in_window = serializers.IntegerField()
    last_seen = TimestampField(allow_null=True)
    tenure_days = serializers.IntegerField(
        help_text="Days since the createdAt trait, else since first seen."
    )
    score_breakdown = BreakdownItemSerializer(many=True)
    scored_at = TimestampField(
        allow_null=True,
        help_text="When the score was last computed (the workspace's last score refresh); "
        "null before the first scoring.",
    )
    traits = serializers.DictField(required=False, help_text="With expand=traits only.")
    segments = SegmentRefSerializer(many=True, required=False, help_text="expand=segments only.")
    _links = RecordLinksSerializer()

    route = ""  # "read-account" or "read-user": the route of the record's own link

    def subject(self, score):
        raise NotImplementedError

    def fallback_first_seen(self, subject):
        raise NotImplementedError

    def metrics(self, score, traits: dict) -> dict:
        subject = self.subject(score)
        scored = score.pk is not None
        if scored and score.tenure_days is not None:
            tenure = score.tenure_days  # the engine's figure when it stored one
        else:
            tenure = tenure_days(traits=traits, first_seen=self.fallback_first_seen(subject))
        computed_at = score_computed_at(score=score, workspace=self.context["workspace"])
        return {
            "workspace_id": score.workspace_id,
            "engagement_score": score.engagement_score,
            "score_change": score.score_change,
            "previous_score": score.previous_score,
            "percentile_rank": rounded_fraction(score.percentile_rank, RANK_DECIMALS),
            "raw_score": whole_number(score.raw_score),
            "previous_raw_score": whole_number(score.previous_raw_score),
            "active_days": score.active_days,
            "adoption": rounded_fraction(score.adoption, SHARE_DECIMALS),
            "events_in_window": score.events_in_window,
            "last_seen": timestamp(score.last_seen),
            "tenure_days": tenure,
            "score_breakdown": _breakdown(score.score_breakdown),
            "scored_at": timestamp(computed_at),
        }

    def finish(self, data: dict, score, traits: dict) -> dict:
        subject = self.subject(score)
        expand = self.context.get("expand", ())
        if "traits" in expand:
            data["traits"] = traits
        if "segments" in expand:
            members = self.context.get("segments", {}).get(subject.id, [])
            data["segments"] = SegmentRefSerializer(members, many=True, context=self.context).data
        data["_links"] = {
            "self": _link(self.context, self.route, subject.id, workspace_id=score.workspace_id),
            "workspace": _link(self.context, "read-workspace", score.workspace_id),
        }
        return data


class AccountSerializer(ScoredRecordSerializer):
    """An account and its metrics in one workspace (instance: an AccountScore with .account)."""

    id = serializers.IntegerField()
    tracking_id = serializers.CharField()
    name = serializers.CharField(allow_null=True, help_text="The name trait, when a string.")
    identified = serializers.BooleanField()
    created_at = TimestampField()
    active_users = serializers.IntegerField()
    total_users = serializers.IntegerField()
    active_user_share = serializers.FloatField(
        allow_null=True, help_text="Share (0-1) of users active, four decimals."
    )

    route = "read-account"

    def subject(self, score) -> Account:
        return score.account

    def fallback_first_seen(self, account: Account):
        return account.created_at

    def to_representation(self, score) -> dict:
        account = score.account
        traits = read_traits(account)
        name = traits.get("name")
        data = {
            "id": account.id,
            "tracking_id": account.tracking_id,
            "name": name if isinstance(name, str) else None,
            "identified": account.identified,
            "created_at": timestamp(account.created_at),
            **self.metrics(score, traits),
            "active_users": score.active_users,
            "total_users": score.total_users,
            "active_user_share": rounded_fraction(score.active_user_share, SHARE_DECIMALS),
        }
        return self.finish(data, score, traits)


class UserSerializer(ScoredRecordSerializer):
    """A user and their metrics in one workspace (instance: a UserScore with .user)."""

    id = serializers.IntegerField()
    tracking_id = serializers.CharField()
    email = serializers.CharField(allow_null=True, help_text="null until the user sends one.")
    identified = serializers.BooleanField()
    first_seen = TimestampField(allow_null=True)

    route = "read-user"

    def subject(self, score) -> User:
        return score.user

    def fallback_first_seen(self, user: User):
        return user.first_seen_at or user.created_at

    def to_representation(self, score) -> dict:
        user = score.user
        traits = read_traits(user)
        data = {
            "id": user.id,
            "tracking_id": user.tracking_id,
            "email": user.email or None,
            "identified": user.identified,
            "first_seen": timestamp(user.first_seen_at),
            **self.metrics(score, traits),
        }
        # The user row's own last-seen time is written as events are applied, seconds before
        # the next score refresh: the fresher of the two is what a reader wants.
        if user.last_seen_at and (score.last_seen is None or user.last_seen_at > score.last_seen):
            data["last_seen"] = timestamp(user.last_seen_at)
        return self.finish(data, score, traits)


# --- Segments ---------------------------------------------------------------------------------


class SegmentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    target = serializers.ChoiceField(choices=["accounts", "users"])
    workspace_id = serializers.IntegerField()
    conditions = ReadListField(child=serializers.DictField(), read=read_conditions)
    member_count = serializers.IntegerField()
    created_at = TimestampField()
    updated_at = TimestampField()
    _links = serializers.SerializerMethodField()

    @extend_schema_field(RecordLinksSerializer)
    def get__links(self, segment) -> dict:
        return {
            "self": _link(self.context, "read-segment", segment.id),
            "members": _link(self.context, "read-segment-members", segment.id),
            "workspace": _link(self.context, "read-workspace", segment.workspace_id),
        }


class SegmentMemberSerializer(serializers.Serializer):
    """A current member of a segment: an account or a user, and when it joined."""

    id = serializers.SerializerMethodField(help_text="The account's or the user's id.")
    type = serializers.SerializerMethodField()
    tracking_id = serializers.SerializerMethodField()
    joined_at = TimestampField()
    _links = serializers.SerializerMethodField()

    def get_id(self, member) -> int:
        return member.account_id or member.user_id

    @extend_schema_field(serializers.ChoiceField(choices=["account", "user"]))
    def get_type(self, member) -> str:
        return "account" if member.account_id else "user"

    def get_tracking_id(self, member) -> str:
        return (member.account or member.user).tracking_id

    @extend_schema_field(RecordLinksSerializer)
    def get__links(self, member) -> dict:
        route = "read-account" if member.account_id else "read-user"
        workspace_id = self.context["workspace"].id
        target_id = member.account_id or member.user_id
        return {
            "self": _link(self.context, route, target_id, workspace_id=workspace_id),
            "workspace": _link(self.context, "read-workspace", workspace_id),
        }


# --- Query parameters -------------------------------------------------------------------------


class ExpandField(serializers.CharField):
    """A comma-separated subset of `choices`, parsed into a set."""

    def __init__(self, *, choices: tuple[str, ...], **kwargs) -> None:
        self.choices = choices
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", f"Comma-separated: {', '.join(choices)}.")
        super().__init__(**kwargs)

    def to_internal_value(self, data) -> set[str]:
        names = {name.strip() for name in super().to_internal_value(data).split(",")}
        names.discard("")
        unknown = sorted(names - set(self.choices))
        if unknown:
            raise serializers.ValidationError(
                f"Unknown expand value(s): {', '.join(unknown)}; "
                f"allowed: {', '.join(self.choices)}."
            )
        return names


@extend_schema_field(OpenApiTypes.INT)
class IdField(serializers.IntegerField):
    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", 2**63 - 1)
        super().__init__(**kwargs)


class WindowQuery(serializers.Serializer):
    limit = serializers.IntegerField(
        min_value=1,
        max_value=MAX_LIMIT,
        default=DEFAULT_LIMIT,
        help_text=f"Page size, 1-{MAX_LIMIT} (default {DEFAULT_LIMIT}).",
    )
    offset = serializers.IntegerField(
        min_value=0, max_value=2**31 - 1, default=0, help_text="Records to skip (default 0)."
    )


class WorkspaceListQuery(WindowQuery):
    pass


class WorkspaceDetailQuery(serializers.Serializer):
    expand = ExpandField(choices=("stats",))


class WorkspaceScopedListQuery(WindowQuery):
    workspace_id = IdField(help_text="The workspace (from GET /v2/workspaces).")


class AccountListQuery(WorkspaceScopedListQuery):
    expand = ExpandField(choices=("traits", "segments"))


class RecordDetailQuery(serializers.Serializer):
    workspace_id = IdField(
        required=False, help_text="The workspace of the metrics (default: the product's first)."
    )
    expand = ExpandField(choices=("traits", "segments"))


class UserListQuery(AccountListQuery):
    match_type = serializers.ChoiceField(
        choices=list(USER_MATCH_TYPES),
        required=False,
        help_text="Look a user up by this (give match_value too).",
    )
    match_value = serializers.CharField(
        required=False,
        max_length=320,
        help_text="The email or tracking id to look up (give match_type too).",
    )


class SegmentMembersQuery(WindowQuery):
    pass


class V1AccountQuery(AccountListQuery):
    id = IdField(
        required=False, help_text="The account's id (or match_type and match_value, not both)."
    )
    match_type = serializers.CharField(
        required=False,
        max_length=255,
        help_text="domain, name, tracking_id or any trait name (give match_value too).",
    )
    match_value = serializers.CharField(required=False, max_length=1000)
