"""Segment records of the read API: a segment and its current members (the shared pieces and
the context are readapi/serializers.py's)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from engagement.stored_json import read_conditions
from readapi.formats import ReadListField, TimestampField
from readapi.serializers import RecordLinksSerializer, link


class SegmentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    target = serializers.ChoiceField(choices=["accounts", "users"])
    workspace_id = serializers.IntegerField()
    match = serializers.ChoiceField(
        choices=["all", "any"], help_text="Members meet all the conditions, or any one of them."
    )
    builtin = serializers.BooleanField(
        help_text="One of the segments every workspace starts with (listed first); editable "
        "and deletable like the others."
    )
    conditions = ReadListField(child=serializers.DictField(), read=read_conditions)
    member_count = serializers.IntegerField(
        help_text="Current members; while `broken`, those of its last good refresh."
    )
    broken = serializers.SerializerMethodField(
        help_text="The last refresh could not evaluate the conditions (stored past the checks, "
        "or by an older release): the segment is skipped and keeps its members until the "
        "conditions are fixed; the next refresh that evaluates them clears this."
    )
    broken_reason = serializers.SerializerMethodField(
        help_text="Why, after the path of the condition at fault (`conditions[0].value: ...`, "
        "positions from 0); null when not broken."
    )
    created_at = TimestampField()
    updated_at = TimestampField()
    _links = serializers.SerializerMethodField()

    def get_broken(self, segment) -> bool:
        return bool(segment.broken_reason)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_broken_reason(self, segment) -> str | None:
        return segment.broken_reason or None

    @extend_schema_field(RecordLinksSerializer)
    def get__links(self, segment) -> dict:
        return {
            "self": link(self.context, "read-segment", segment.id),
            "members": link(self.context, "read-segment-members", segment.id),
            "workspace": link(self.context, "read-workspace", segment.workspace_id),
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
            "self": link(self.context, route, target_id, workspace_id=workspace_id),
            "workspace": link(self.context, "read-workspace", workspace_id),
        }
