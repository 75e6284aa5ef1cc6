"""The read API's workspace record (docs/read-api.md, "Endpoints")."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from engagement.stored_json import read_account_filter
from readapi.formats import ReadDictField, TimestampField
from readapi.serializers import RecordLinksSerializer, link


class EventWeightSerializer(serializers.Serializer):
    event = serializers.CharField(source="event_name")
    weight = serializers.IntegerField()


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
            "self": link(self.context, "read-workspace", workspace.id),
            "accounts": link(self.context, "read-accounts", workspace_id=workspace.id),
            "users": link(self.context, "read-users", workspace_id=workspace.id),
            "segments": link(self.context, "read-segments", workspace_id=workspace.id),
        }

    @extend_schema_field(WorkspaceStatsSerializer)
    def get_stats(self, workspace) -> dict:
        stats = self.context["stats"]
        return {"users": stats.users, "accounts": stats.accounts}

    def to_representation(self, workspace) -> dict:
        if self.context.get("stats") is None:
            self.fields.pop("stats", None)
        return super().to_representation(workspace)
