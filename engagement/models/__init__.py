"""The domain, one module per area; every model is importable from here."""

from engagement.models.erasure import Erasure, Suppression
from engagement.models.events import Event, EventActivity, EventDayTally, EventName, EventRollup
from engagement.models.people import Account, Membership, TraitsMixin, User, UserAlias
from engagement.models.products import EventWeight, Product, ProductMembership, Workspace
from engagement.models.progress import ActivationStep, Feature
from engagement.models.scores import (
    AccountScore,
    AccountScoreDay,
    RefreshDemand,
    ScoreFields,
    ScoreHistoryBackfill,
    ScoreHistoryState,
    ScoringState,
    UserScore,
    UserScoreDay,
)
from engagement.models.segments import Segment, SegmentMember, SegmentMembershipChange

__all__ = [
    "Account",
    "ActivationStep",
    "AccountScore",
    "AccountScoreDay",
    "Erasure",
    "Event",
    "EventActivity",
    "EventDayTally",
    "EventName",
    "EventRollup",
    "EventWeight",
    "Feature",
    "Membership",
    "Product",
    "ProductMembership",
    "RefreshDemand",
    "ScoreFields",
    "ScoreHistoryBackfill",
    "ScoreHistoryState",
    "ScoringState",
    "Segment",
    "SegmentMember",
    "SegmentMembershipChange",
    "Suppression",
    "TraitsMixin",
    "User",
    "UserAlias",
    "UserScore",
    "UserScoreDay",
    "Workspace",
]
