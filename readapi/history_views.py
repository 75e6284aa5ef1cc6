"""The read API's score history: an account's or a user's daily scores in a workspace.

The views derive from ReadApiView, so authentication, throttling and tenant scoping are the other
reads': the account (or user) and the workspace must both be the token's product's, else 404.
"""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from engagement.history import (
    HISTORY_DEFAULT_DAYS,
    HISTORY_MAX_DAYS,
    ScorePoint,
    account_score_history,
    user_score_history,
)
from readapi.formats import whole_number
from readapi.params import IdField
from readapi.views import ERRORS, ReadApiView


class HistoryQuery(serializers.Serializer):
    workspace_id = IdField(help_text="The workspace of the scores (from GET /v2/workspaces).")
    days = serializers.IntegerField(
        min_value=1,
        max_value=HISTORY_MAX_DAYS,
        default=HISTORY_DEFAULT_DAYS,
        help_text=f"How many UTC days, today included: 1-{HISTORY_MAX_DAYS} "
        f"(default {HISTORY_DEFAULT_DAYS}).",
    )


class ScorePointSerializer(serializers.Serializer):
    date = serializers.DateField(help_text="A UTC day, YYYY-MM-DD.")
    engagement_score = serializers.IntegerField(
        allow_null=True,
        help_text="0-100: the score as it stood at the end of that day (today: now). Null on a "
        "day before the subject was first seen: it had no score yet.",
    )
    raw_score = serializers.IntegerField(
        allow_null=True,
        help_text="Sum of event weights in the lookback window ending that day, a whole number "
        "as in the account and user records. Null on a day before the subject was first seen.",
    )

    def to_representation(self, point: ScorePoint) -> dict:
        return {
            "date": point.date.isoformat(),
            "engagement_score": point.engagement_score,
            "raw_score": whole_number(point.raw_score),
        }


class ScoreHistorySerializer(serializers.Serializer):
    # The serializer's metaclass pops declared fields off the class, so Serializer.data (the
    # rendered body) stays; the stubs cannot see that.
    data = ScorePointSerializer(  # type: ignore[assignment]
        many=True, help_text="One point per day, oldest first; the last is today's live score."
    )


class AccountHistoryView(ReadApiView):
    @extend_schema(
        operation_id="accounts_history",
        summary="An account's daily engagement score over the last days, today's last",
        description="A day with no activity in its window scores 0; a day before the account "
        "was first seen (its earliest user's first event) is null. Past days are as they "
        "stood at the end of each UTC day (the formula over the window ending that day); the "
        "last point is today's score, the one GET /v2/accounts/{id} serves.",
        parameters=[HistoryQuery],
        responses={200: ScoreHistorySerializer, **ERRORS},
    )
    def get(self, request: Request, account_id: int) -> Response:
        params = self.params(HistoryQuery)
        account = self.scoped_account(account_id)
        workspace = self.scoped_workspace(params["workspace_id"])
        points = account_score_history(
            workspace_id=workspace.id, account_id=account.id, days=params["days"]
        )
        return Response(ScoreHistorySerializer({"data": points}).data)


class UserHistoryView(ReadApiView):
    @extend_schema(
        operation_id="users_history",
        summary="A user's daily engagement score over the last days, today's last",
        description="A day with no activity in its window scores 0; a day before the user "
        "was first seen (its first event) is null. Past days are as they "
        "stood at the end of each UTC day (the formula over the window ending that day); the "
        "last point is today's score, the one GET /v2/users/{id} serves.",
        parameters=[HistoryQuery],
        responses={200: ScoreHistorySerializer, **ERRORS},
    )
    def get(self, request: Request, user_id: int) -> Response:
        params = self.params(HistoryQuery)
        user = self.scoped_user(user_id)
        workspace = self.scoped_workspace(params["workspace_id"])
        points = user_score_history(workspace_id=workspace.id, user_id=user.id, days=params["days"])
        return Response(ScoreHistorySerializer({"data": points}).data)
