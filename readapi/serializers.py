"""Records of the read API (output) and the query parameters each endpoint accepts (input).

Serializer context: `links` (readapi.links.Links, which builds `_links` from route names),
`workspace` (the workspace the metrics belong to), `expand` (set of names) and `segments`
({account or user id: [SegmentMember]}).

One format for every record (docs/read-api.md "Record format"): times are `timestamp()` text,
whole-number metrics integers, shares and ranks rounded by `rounded_fraction`, unknown values null.
"""

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, ClassVar, TypeVar, cast

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from engagement.activation import Activation, activation_progress
from engagement.features import features_used
from engagement.hierarchy import AccountRef, account_parents
from engagement.models import Account, User
from engagement.period_figures import PeriodFigures, period_figures, recently_scored_events
from engagement.presentation import (
    ScoredAccount,
    ScoredUser,
    account_last_seen,
    account_name,
    user_last_seen,
)
from engagement.ranking import score_computed_at
from engagement.score_basis import account_score_basis
from engagement.scoring import tenure_days
from readapi.formats import (
    RANK_DECIMALS,
    SHARE_DECIMALS,
    TimestampField,
    rounded_fraction,
    timestamp,
    whole_number,
)


def link(context: Mapping[str, Any], route: str, ident: int | None = None, **query: int) -> str:
    return context["links"].url(route, ident, **query)


# --- Shared pieces ----------------------------------------------------------------------------


class BreakdownItemSerializer(serializers.Serializer):
    event = serializers.CharField()
    count = serializers.IntegerField()
    weight = serializers.IntegerField()
    points = serializers.IntegerField(allow_null=True, help_text="count x weight.")


class ActivationStepSerializer(serializers.Serializer):
    step = serializers.CharField(help_text="event:<name> or trait:<name>.")
    done = serializers.BooleanField()
    done_at = TimestampField(
        allow_null=True,
        help_text="An event step: the UTC day it was first sent (midnight). A trait step: when "
        "the message that set it was sent.",
    )


class FeatureUseSerializer(serializers.Serializer):
    feature = serializers.CharField()
    used = serializers.BooleanField(help_text="Any of its events sent in the window.")


class RecordLinksSerializer(serializers.Serializer):
    self = serializers.URLField()
    workspace = serializers.URLField(required=False)
    children = serializers.URLField(
        required=False, help_text="Accounts: the accounts right under this one, ranked."
    )
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
        return {"self": link(self.context, "read-segment", member.segment_id)}


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


FieldT = TypeVar("FieldT", bound=serializers.Field)


def read(field: FieldT, value: Callable) -> FieldT:
    """A record's field and how its value is read: value(serializer, found) with `found` a
    ScoredAccount or ScoredUser. The record is this one list of fields: the schema documents it
    and `to_representation` renders it."""
    cast(Any, field).read_value = value  # read back by ScoredRecordSerializer.readers
    return field


def _tenure(serializer, found) -> int:
    score = found.score
    if score.is_stored and score.tenure_days is not None:
        return score.tenure_days  # the engine's figure when it stored one
    first_seen = serializer.fallback_first_seen(serializer.subject(found))
    return tenure_days(traits=found.traits, first_seen=first_seen)


def _scored_at(serializer, found) -> str | None:
    workspace = serializer.context["workspace"]
    return timestamp(score_computed_at(score=found.score, workspace=workspace))


# The instance a record serializer renders: a ScoredAccount or a ScoredUser.
Found = TypeVar("Found", bound=ScoredAccount | ScoredUser)
# A value page_read loads for a whole page.
Loaded = TypeVar("Loaded")


class ScoredRecordSerializer(serializers.Serializer[Found]):
    """The metrics accounts and users both carry; the instance is a ScoredAccount or ScoredUser.

    Records are built directly (`to_representation`) from the declared fields' `read` values
    rather than by DRF's per-field machinery: a page of 100 records is on every list request's hot
    path, and that machinery costs more than the queries behind it.
    """

    workspace_id = read(serializers.IntegerField(), lambda s, f: f.score.workspace_id)
    engagement_score = read(
        serializers.IntegerField(help_text="0-100 in this workspace."),
        lambda s, f: f.score.engagement_score,
    )
    score_change = read(
        serializers.IntegerField(help_text="Now minus one lookback period earlier."),
        lambda s, f: f.score.score_change,
    )
    previous_score = read(
        serializers.IntegerField(help_text="The score one lookback period earlier."),
        lambda s, f: f.score.previous_score,
    )
    percentile_rank = read(
        serializers.FloatField(
            allow_null=True,
            help_text="0-100, one decimal: the share of the workspace's active subjects (score "
            "above 0) that score lower. Null for a score of 0: a subject without activity has "
            "no rank.",
        ),
        lambda s, f: rounded_fraction(f.percentile_rank, RANK_DECIMALS),
    )
    raw_score = read(
        serializers.IntegerField(allow_null=True, help_text="Sum of event weights in the window."),
        lambda s, f: whole_number(f.score.raw_score),
    )
    previous_raw_score = read(
        serializers.IntegerField(
            allow_null=True, help_text="The raw score of the window one lookback period earlier."
        ),
        lambda s, f: whole_number(f.score.previous_raw_score),
    )
    active_days = read(serializers.IntegerField(), lambda s, f: f.score.active_days)
    adoption = read(
        serializers.FloatField(
            allow_null=True,
            help_text="Share (0-1), four decimals, of the workspace's features used in the "
            "window; without features, of its weighted event names used.",
        ),
        lambda s, f: rounded_fraction(f.score.adoption, SHARE_DECIMALS),
    )
    events_in_window = read(serializers.IntegerField(), lambda s, f: f.score.events_in_window)
    # The hosted original's names (engagement/period_figures.py).
    score_yesterday = read(
        serializers.IntegerField(
            allow_null=True,
            help_text="Yesterday's stored daily score (UTC); null when the history has none.",
        ),
        lambda s, f: s.period(f).score_yesterday,
    )
    score_last_period = read(
        serializers.IntegerField(help_text="The score one lookback period ago."),
        lambda s, f: f.score.previous_score,
    )
    overall_scored_events = read(
        serializers.IntegerField(
            help_text="Events ever counted under a scored event name (weight above 0), from "
            "the daily rollups, without the daily cap."
        ),
        lambda s, f: s.period(f).overall_scored_events,
    )
    recently_scored_events = read(
        serializers.IntegerField(
            help_text="Events the score counts in the window (daily cap applied): the sum of "
            "the breakdown's counts."
        ),
        lambda s, f: recently_scored_events(f.score.score_breakdown),
    )
    activation = read(
        serializers.FloatField(
            allow_null=True,
            help_text="Share (0-1) of the workspace's activation steps done, four decimals; "
            "null when it has none for this kind of record.",
        ),
        lambda s, f: rounded_fraction(s.activation_of(f).share, SHARE_DECIMALS),
    )
    activation_steps = read(
        ActivationStepSerializer(many=True),
        lambda s, f: [
            {"step": d.step, "done": d.done, "done_at": timestamp(d.done_at)}
            for d in s.activation_of(f).steps
        ],
    )
    features = read(
        FeatureUseSerializer(many=True),
        lambda s, f: [
            {"feature": u.feature, "used": u.used}
            for u in s.page_read(f, "features", features_used)
        ],
    )
    last_seen = read(TimestampField(allow_null=True), lambda s, f: timestamp(s.seen_last(f)))
    tenure_days = read(
        serializers.IntegerField(
            help_text="Days since the createdAt trait, else since first seen."
        ),
        _tenure,
    )
    score_breakdown = read(
        BreakdownItemSerializer(many=True), lambda s, f: _breakdown(f.score.score_breakdown)
    )
    scored_at = read(
        TimestampField(
            allow_null=True,
            help_text="When the score was last computed (the workspace's last score refresh); "
            "null before the first scoring.",
        ),
        _scored_at,
    )
    # Added by `finish`: the expansions asked for, and the links.
    traits = serializers.DictField(required=False, help_text="With expand=traits only.")
    segments = SegmentRefSerializer(many=True, required=False, help_text="expand=segments only.")
    _links = RecordLinksSerializer()

    route = ""  # "read-account" or "read-user": the route of the record's own link

    _readers: ClassVar[list[tuple[str, Callable]]]

    def subject(self, found: Found) -> Account | User:
        raise NotImplementedError

    def page_read(self, found: Found, name: str, load: Callable[..., dict[int, Loaded]]) -> Loaded:
        """The record's value from `load(workspace, target, ids)`, called once for the whole page
        the record is on (a dict by subject id)."""
        cache = self.__dict__.setdefault("_page_values", {})
        values, subject_id = cache.get(name), self.subject(found).id
        if values is None or subject_id not in values:
            page = getattr(self.parent, "instance", None) or [found]
            values = load(
                workspace=self.context["workspace"],
                target=self.route.removeprefix("read-"),
                ids=[self.subject(item).id for item in page],
            )
            cache[name] = values
        return values[subject_id]

    def period(self, found: Found) -> PeriodFigures:
        return self.page_read(found, "period", period_figures)

    def activation_of(self, found: Found) -> Activation:
        return self.page_read(found, "activation", activation_progress)

    def fallback_first_seen(self, subject):
        raise NotImplementedError

    def seen_last(self, found: Found) -> datetime | None:
        raise NotImplementedError

    @classmethod
    def readers(cls) -> list[tuple[str, Callable]]:
        """(name, read) of the record's fields: the subclass's own first, then the metrics."""
        found = cls.__dict__.get("_readers")
        if found is None:
            fields = cls._declared_fields
            inherited = {
                name for base in cls.__mro__[1:] for name in vars(base).get("_declared_fields", {})
            }
            names = sorted(fields, key=lambda name: name in inherited)  # stable: own first
            found = [
                (n, cast(Any, fields[n]).read_value)
                for n in names
                if hasattr(fields[n], "read_value")
            ]
            cls._readers = found
        return found

    def to_representation(self, found: Found) -> dict:
        data = {name: value(self, found) for name, value in self.readers()}
        return self.finish(data, found)

    def finish(self, data: dict, found: Found) -> dict:
        subject, score = self.subject(found), found.score
        expand = self.context.get("expand", ())
        if "traits" in expand:
            data["traits"] = found.traits
        if "segments" in expand:
            members = self.context.get("segments", {}).get(subject.id, [])
            data["segments"] = SegmentRefSerializer(members, many=True, context=self.context).data
        data["_links"] = {
            "self": link(self.context, self.route, subject.id, workspace_id=score.workspace_id),
            "workspace": link(self.context, "read-workspace", score.workspace_id),
        }
        return data


def _ref(ref: AccountRef | None) -> dict | None:
    return None if ref is None else {"id": ref.id, "tracking_id": ref.tracking_id}


class AccountRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    tracking_id = serializers.CharField()


class ScoreBasisSerializer(serializers.Serializer):
    """How the account's engagement score is formed (engagement/score_basis.py)."""

    kind = serializers.ChoiceField(
        choices=["users_mean", "no_users", "not_scored"],
        help_text="users_mean: the mean of its users' scores; no_users: no user is linked, so "
        "it has no score (0), whatever its events; not_scored: the engine has not scored it yet.",
    )
    users = serializers.IntegerField(
        help_text="The users whose scores the mean takes (total_users): its own and, with an "
        "account hierarchy, those of the accounts under it."
    )
    description = serializers.CharField(help_text="The same, in words.")


def _score_basis(found: ScoredAccount) -> dict:
    basis = account_score_basis(found.score)
    return {"kind": basis.kind, "users": basis.users, "description": basis.sentence()}


class AccountSerializer(ScoredRecordSerializer[ScoredAccount]):
    """An account and its metrics in one workspace. Its engagement score is the mean of its
    users' scores (`score_basis`); its raw score and breakdown are the account's own events."""

    # The instance is a ScoredAccount (engagement.presentation).

    id = read(serializers.IntegerField(), lambda s, f: f.account.id)
    tracking_id = read(serializers.CharField(), lambda s, f: f.account.tracking_id)
    parent = read(
        AccountRefSerializer(
            allow_null=True,
            help_text="The account above this one (a group call's parent_group_id trait), "
            "or null; _links.children lists the accounts under it.",
        ),
        lambda s, f: _ref(s.page_read(f, "parent", account_parents)),
    )
    name = read(
        serializers.CharField(
            allow_null=True, help_text="The name trait, when a non-empty string."
        ),
        lambda s, f: account_name(f.traits),
    )
    identified = read(serializers.BooleanField(), lambda s, f: f.account.identified)
    created_at = read(TimestampField(), lambda s, f: timestamp(f.account.created_at))
    active_users = read(serializers.IntegerField(), lambda s, f: f.score.active_users)
    total_users = read(serializers.IntegerField(), lambda s, f: f.score.total_users)
    score_basis = read(ScoreBasisSerializer(), lambda s, f: _score_basis(f))
    score_breakdown = read(
        BreakdownItemSerializer(
            many=True,
            help_text="The account's events in the window (its raw score), biggest first; its "
            "engagement score is the mean of its users' scores (score_basis).",
        ),
        lambda s, f: _breakdown(f.score.score_breakdown),
    )
    active_user_share = read(
        serializers.FloatField(
            allow_null=True, help_text="Share (0-1) of users active, four decimals."
        ),
        lambda s, f: rounded_fraction(f.score.active_user_share, SHARE_DECIMALS),
    )

    route = "read-account"

    def subject(self, found: ScoredAccount) -> Account:
        return found.account

    def finish(self, data: dict, found: ScoredAccount) -> dict:
        data = super().finish(data, found)
        data["_links"]["children"] = link(
            self.context,
            "read-accounts",
            workspace_id=found.score.workspace_id,
            parent_id=found.account.id,
        )
        return data

    def fallback_first_seen(self, account: Account):
        return account.created_at

    def seen_last(self, found: ScoredAccount) -> datetime | None:
        return account_last_seen(found.score)


class UserSerializer(ScoredRecordSerializer[ScoredUser]):
    """A user and their metrics in one workspace."""

    # The instance is a ScoredUser (engagement.presentation).

    id = read(serializers.IntegerField(), lambda s, f: f.user.id)
    tracking_id = read(serializers.CharField(), lambda s, f: f.user.tracking_id)
    email = read(
        serializers.CharField(allow_null=True, help_text="null until the user sends one."),
        lambda s, f: f.user.email or None,
    )
    identified = read(serializers.BooleanField(), lambda s, f: f.user.identified)
    first_seen = read(TimestampField(allow_null=True), lambda s, f: timestamp(f.user.first_seen_at))

    route = "read-user"

    def subject(self, found: ScoredUser) -> User:
        return found.user

    def fallback_first_seen(self, user: User):
        return user.first_seen_at or user.created_at

    def seen_last(self, found: ScoredUser) -> datetime | None:
        return user_last_seen(found.user, found.score)
