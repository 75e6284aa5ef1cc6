"""The query parameters each read API endpoint accepts, validated by its view."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from engagement.selectors import USER_MATCH_TYPES
from readapi.pagination import DEFAULT_LIMIT, MAX_LIMIT


class ExpandField(serializers.CharField):
    """A comma-separated subset of `choices`, parsed into a set."""

    def __init__(self, *, choices: tuple[str, ...], **kwargs) -> None:
        self.choices = choices
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", f"Comma-separated: {', '.join(choices)}.")
        super().__init__(**kwargs)

    # A CharField parsed further, into a set: DRF hands on whatever this returns.
    def to_internal_value(self, data: Any) -> set[str]:  # type: ignore[override]
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
    parent_id = IdField(
        required=False,
        help_text="Only the accounts right under this account (its children), ranked the same.",
    )


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
