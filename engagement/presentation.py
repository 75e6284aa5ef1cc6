"""How an account or a user is presented, the same in the read API, the dashboard and the admin:
its display name and the key its name sorts by, its last-seen time, a trait value as text, which
traits are the marketplace license's, and a segment's (or an automation's) condition in words.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by apps' modules loaded before the models are ready
    from engagement.models import Account, AccountScore, User, UserScore

# Traits imported from the Atlassian Marketplace (a license's fields) start with this.
MARKETPLACE_PREFIX = "am."
# An account's monthly recurring revenue in USD, a JSON number the Marketplace sync sets: the
# dashboard's money figures sum it, through an index of the accounts that have it.
MRR_TRAIT = MARKETPLACE_PREFIX + "mrr"
# The group trait that names an account's parent (engagement/hierarchy).
PARENT_TRAIT = "parent_group_id"
# A name's sort key: digit runs padded to this many digits ("company 2" before "company 10"), the
# whole cut to the column's length (User.name_key, Account.name_key).
NAME_KEY_DIGITS = 12
NAME_KEY_LENGTH = 255
_DIGIT_RUN = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class ScoredAccount:
    """An account as reads show it: the row, its traits (decoded for reading, see
    engagement.stored_json), its score row in one workspace (unsaved and all zeros when the
    engine has not scored the account yet) and that score's percentile rank in the workspace
    (None for a score of 0)."""

    account: Account
    traits: dict
    score: AccountScore
    percentile_rank: float | None

    @property
    def account_id(self) -> int:
        return self.account.id


@dataclass(frozen=True, slots=True)
class ScoredUser:
    """A user as reads show them: the row, its traits, its score row in one workspace and that
    score's percentile rank."""

    user: User
    traits: dict
    score: UserScore
    percentile_rank: float | None

    @property
    def user_id(self) -> int:
        return self.user.id


def _string(value: object) -> str | None:
    """A trait that is a string with something in it, else None."""
    return value if isinstance(value, str) and value.strip() else None


def account_name(traits: dict) -> str | None:
    """An account's name: its `name` trait when that is a non-empty string, else None (a number
    or an object sent as a name is not one)."""
    return _string(traits.get("name"))


def user_name(traits: dict, email: str | None) -> str | None:
    """A user's name: the `name` trait, else `firstName lastName`, else the email; None when
    none of them is a non-empty string."""
    full = " ".join(
        part for part in (_string(traits.get(key)) for key in ("firstName", "lastName")) if part
    )
    return _string(traits.get("name")) or full or _string(email)


def natural_sort_key(name: str) -> str:
    """The key a displayed name sorts by, in natural order: lower-cased, every run of digits
    zero-padded to NAME_KEY_DIGITS ("Company 2" -> "company 000000000002"), so that the
    database's plain text order of the keys puts "Company 2" before "Company 10"."""
    padded = _DIGIT_RUN.sub(lambda run: run.group().zfill(NAME_KEY_DIGITS), name.lower())
    return padded[:NAME_KEY_LENGTH]


def account_name_key(traits: dict, tracking_id: str) -> str:
    """The sort key of the name a page shows for an account: its name, else its tracking id."""
    return natural_sort_key(account_name(traits) or tracking_id)


def user_name_key(traits: dict, email: str | None, tracking_id: str) -> str:
    """The sort key of the name a page shows for a user: user_name, else the tracking id."""
    return natural_sort_key(user_name(traits, email) or tracking_id)


def account_last_seen(score: AccountScore | None) -> datetime | None:
    """An account's last-seen time: the latest event of the account the scoring engine has
    seen (an account row keeps no time of its own)."""
    return score.last_seen if score is not None else None


def user_last_seen(user: User, score: UserScore | None) -> datetime | None:
    """A user's last-seen time: the fresher of the user row's (written as events are applied)
    and the score row's (a copy of it at the last score refresh, up to a minute behind; and the
    only one when events were imported into the scores directly). Identifies do not count."""
    seen = [time for time in (user.last_seen_at, score.last_seen if score else None) if time]
    return max(seen) if seen else None


def trait_text(value: object) -> str:
    """A trait value as a page or a cell shows it: a string as it is, null as nothing, anything
    else as its JSON text (`true`, `42`, `{"a": 1}`)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def is_marketplace_trait(name: str) -> bool:
    return name.startswith(MARKETPLACE_PREFIX)


def split_traits(traits: dict) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(own traits, marketplace license traits), each as sorted (name, text) pairs."""
    own = sorted((k, trait_text(v)) for k, v in traits.items() if not is_marketplace_trait(k))
    license_ = sorted((k, trait_text(v)) for k, v in traits.items() if is_marketplace_trait(k))
    return own, license_


# --- Conditions in words ----------------------------------------------------------------------

# The metrics a condition can test (engagement/segment_conditions.py), as a page names them.
METRIC_WORDS = {
    "engagement_score": "score",
    "score_change": "score change",
    "raw_score": "raw score",
    "percentile_rank": "percentile rank",
    "active_days": "active days",
    "events_in_window": "events in the window",
    "adoption": "adoption",
    "last_seen": "last seen",
    "tenure_days": "days since created",
    "active_users": "active users",
    "total_users": "users",
    "active_user_share": "share of active users",
}
OPERATOR_WORDS = {
    "equals": "equals",
    "not_equals": "does not equal",
    "contains": "contains",
    "greater_than": "greater than",
    "less_than": "less than",
    "is_set": "is set",
    "is_not_set": "is not set",
}


def _value_words(value: object) -> str:
    return trait_text(value) if value is not None else "nothing"


def _plural(count: object, one: str, many: str) -> str:
    return f"{trait_text(count)} {one if count == 1 else many}"


def condition_text(condition: dict) -> str:
    """A condition as a sentence: "plan equals pro", "score greater than 74", "Report_Created at
    least 3 times in the last 7 days", "last seen within the last 30 days", a group as
    "(score less than 50 or score change less than -9)". One that is not a
    condition the language knows (stored before a check, or broken) is shown as its JSON."""
    inner = condition.get("any")
    if isinstance(inner, list) and inner and len(condition) == 1:
        # A group ("any" of its conditions, engagement/segment_conditions.py).
        # Groups do not nest: one inside a group (never accepted) is shown as its JSON.
        said = [
            condition_text(c) if isinstance(c, dict) and "any" not in c else trait_text(c)
            for c in inner
        ]
        return said[0] if len(said) == 1 else f"({' or '.join(said)})"
    field = condition.get("field")
    operator = condition.get("operator")
    value = condition.get("value")
    if not isinstance(field, str) or ":" not in field or not isinstance(operator, str):
        return trait_text(condition)
    kind, name = field.split(":", 1)
    if kind == "event" and operator == "count_at_least":
        days = condition.get("within_last_days")
        since = " ever" if days is None else f" in the last {_plural(days, 'day', 'days')}"
        return f"{name} at least {_plural(value, 'time', 'times')}{since}"
    if kind == "metric":
        name = METRIC_WORDS.get(name, name)
    elif kind != "trait":
        return trait_text(condition)
    if operator in ("is_set", "is_not_set"):
        return f"{name} {OPERATOR_WORDS[operator]}"
    if operator == "within_last_days":
        return f"{name} within the last {_plural(value, 'day', 'days')}"
    if operator == "more_than_days_ago":
        return f"{name} more than {_plural(value, 'day', 'days')} ago"
    if operator == "within_next_days":
        return f"{name} within the next {_plural(value, 'day', 'days')}"
    if operator in OPERATOR_WORDS:
        return f"{name} {OPERATOR_WORDS[operator]} {_value_words(value)}"
    return trait_text(condition)
