"""Records of the read API (output) and the query parameters each endpoint accepts (input).

Serializer context: `base` (the absolute root URL, for `_links`), `workspace` (the workspace the
metrics belong to), `expand` (set of names) and `segments` ({account or user id: [SegmentMember]}).

One format for every record (docs/read-api.md "Record format"): times are `timestamp()` text,
whole-number metrics integers, shares and ranks rounded by `rounded_fraction`, unknown values null.
"""

from datetime import datetime

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from engagement.models import Account, User
from engagement.presentation import (
    ScoredAccount,
    ScoredUser,
    account_last_seen,
    account_name,
    user_last_seen,
)
from engagement.ranking import score_computed_at
from engagement.scoring import tenure_days
from engagement.stored_json import read_account_filter, read_conditions
from readapi.formats import (
    RANK_DECIMALS,
    SHARE_DECIMALS,
    TimestampField,
    rounded_fraction,
    timestamp,
    whole_number,
)


def _link(context: dict, path: str) -> str:
    return f"{context['base']}{path}"


# --- Shared pieces ----------------------------------------------------------------------------


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


class ErrorSerializer(serializers.Serializer):
    """The one error body of every API."""

    code = serializers.CharField()
    message = serializers.CharField()
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()), required=False
    )


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
        return {"self": _link(self.context, f"/v2/segments/{member.segment_id}")}


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
        query = f"?workspace_id={workspace.id}"
        return {
            "self": _link(self.context, f"/v2/workspaces/{workspace.id}"),
            "accounts": _link(self.context, f"/v2/accounts{query}"),
            "users": _link(self.context, f"/v2/users{query}"),
            "segments": _link(self.context, f"/v2/segments{query}"),
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
    """The metrics accounts and users both carry; the instance is a ScoredAccount or ScoredUser.

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

    collection = ""  # "accounts" or "users": the API collection of the record's own link

    def subject(self, found):
        raise NotImplementedError

    def fallback_first_seen(self, subject):
        raise NotImplementedError

    def seen_last(self, found) -> datetime | None:
        raise NotImplementedError

    def metrics(self, found: ScoredAccount | ScoredUser) -> dict:
        score, subject = found.score, self.subject(found)
        scored = score.pk is not None
        if scored and score.tenure_days is not None:
            tenure = score.tenure_days  # the engine's figure when it stored one
        else:
            tenure = tenure_days(traits=found.traits, first_seen=self.fallback_first_seen(subject))
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
            "last_seen": timestamp(self.seen_last(found)),
            "tenure_days": tenure,
            "score_breakdown": _breakdown(score.score_breakdown),
            "scored_at": timestamp(computed_at),
        }

    def finish(self, data: dict, found: ScoredAccount | ScoredUser) -> dict:
        subject, score = self.subject(found), found.score
        expand = self.context.get("expand", ())
        if "traits" in expand:
            data["traits"] = found.traits
        if "segments" in expand:
            members = self.context.get("segments", {}).get(subject.id, [])
            data["segments"] = SegmentRefSerializer(members, many=True, context=self.context).data
        base = self.context["base"]
        data["_links"] = {
            "self": f"{base}/v2/{self.collection}/{subject.id}?workspace_id={score.workspace_id}",
            "workspace": f"{base}/v2/workspaces/{score.workspace_id}",
        }
        return data


class AccountSerializer(ScoredRecordSerializer):
    """An account and its metrics in one workspace (instance: a ScoredAccount)."""

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

    collection = "accounts"

    def subject(self, found: ScoredAccount) -> Account:
        return found.account

    def fallback_first_seen(self, account: Account):
        return account.created_at

    def seen_last(self, found: ScoredAccount) -> datetime | None:
        return account_last_seen(found.score)

    def to_representation(self, found: ScoredAccount) -> dict:
        account, score = found.account, found.score
        data = {
            "id": account.id,
            "tracking_id": account.tracking_id,
            "name": account_name(found.traits),
            "identified": account.identified,
            "created_at": timestamp(account.created_at),
            **self.metrics(found),
            "active_users": score.active_users,
            "total_users": score.total_users,
            "active_user_share": rounded_fraction(score.active_user_share, SHARE_DECIMALS),
        }
        return self.finish(data, found)


class UserSerializer(ScoredRecordSerializer):
    """A user and their metrics in one workspace (instance: a ScoredUser)."""

    id = serializers.IntegerField()
    tracking_id = serializers.CharField()
    email = serializers.CharField(allow_null=True, help_text="null until the user sends one.")
    identified = serializers.BooleanField()
    first_seen = TimestampField(allow_null=True)

    collection = "users"

    def subject(self, found: ScoredUser) -> User:
        return found.user

    def fallback_first_seen(self, user: User):
        return user.first_seen_at or user.created_at

    def seen_last(self, found: ScoredUser) -> datetime | None:
        return user_last_seen(found.user, found.score)

    def to_representation(self, found: ScoredUser) -> dict:
        user = found.user
        data = {
            "id": user.id,
            "tracking_id": user.tracking_id,
            "email": user.email or None,
            "identified": user.identified,
            "first_seen": timestamp(user.first_seen_at),
            **self.metrics(found),
        }
        return self.finish(data, found)


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
            "self": _link(self.context, f"/v2/segments/{segment.id}"),
            "members": _link(self.context, f"/v2/segments/{segment.id}/members"),
            "workspace": _link(self.context, f"/v2/workspaces/{segment.workspace_id}"),
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
        collection = "accounts" if member.account_id else "users"
        workspace_id = self.context["workspace"].id
        target_id = member.account_id or member.user_id
        return {
            "self": _link(
                self.context, f"/v2/{collection}/{target_id}?workspace_id={workspace_id}"
            ),
            "workspace": _link(self.context, f"/v2/workspaces/{workspace_id}"),
        }
