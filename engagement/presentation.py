"""How an account or a user is presented, the same in the read API, the dashboard and the admin:
its display name, its last-seen time, a trait value as text, and which traits are the
marketplace license's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by apps' modules loaded before the models are ready
    from engagement.models import Account, AccountScore, User, UserScore

# Traits imported from the Atlassian Marketplace (a license's fields) start with this.
MARKETPLACE_PREFIX = "am."
# The group trait that names an account's parent (engagement/hierarchy).
PARENT_TRAIT = "parent_group_id"


@dataclass(frozen=True, slots=True)
class ScoredAccount:
    """An account as reads show it: the row, its traits (decoded for reading, see
    engagement.stored_json) and its score row in one workspace (unsaved and all zeros when the
    engine has not scored the account yet)."""

    account: Account
    traits: dict
    score: AccountScore

    @property
    def account_id(self) -> int:
        return self.account.id


@dataclass(frozen=True, slots=True)
class ScoredUser:
    """A user as reads show them: the row, its traits and its score row in one workspace."""

    user: User
    traits: dict
    score: UserScore

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
