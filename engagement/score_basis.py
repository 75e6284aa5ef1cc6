"""How an account's score is formed, said once for the dashboard and the read API.

An account's engagement score is the mean of its users' scores (docs/scoring.md "The formula"),
not a score of its own events: those events are its raw score and breakdown, which say what the
account did, while its users' scores say how engaged its people are. With an account hierarchy,
its users are its own and those of the accounts under it, each counted once. An account without
users therefore has no score, whatever events it has: the reason is given in words rather than
left as a bare 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engagement.models import AccountScore

ScoreBasisKind = Literal["users_mean", "no_users", "not_scored"]

NO_USERS_SENTENCE = (
    "No users are linked to this account, so it has no score: "
    "its score is the mean of its users' scores."
)
NOT_SCORED_SENTENCE = "Not scored yet: its score will be the mean of its users' scores."


@dataclass(frozen=True, slots=True)
class ScoreBasis:
    """What an account's score is the mean of: `users` linked users at its last scoring
    (`users_mean`), none (`no_users`), or not known before its first scoring (`not_scored`)."""

    kind: ScoreBasisKind
    users: int

    def sentence(self, *, with_accounts_under: bool = False) -> str:
        """The basis in words; `with_accounts_under` when the account has accounts under it,
        whose users its own count includes."""
        if self.kind == "not_scored":
            return NOT_SCORED_SENTENCE
        if self.kind == "no_users":
            return NO_USERS_SENTENCE
        whose = "user's score" if self.users == 1 else "users' scores"
        under = " (its own and those of the accounts under it)" if with_accounts_under else ""
        return f"Its score is the mean of its {self.users} {whose}{under}."


def account_score_basis(score: AccountScore) -> ScoreBasis:
    """The basis of this account score row (unsaved for an account not scored yet)."""
    if not score.is_stored:
        return ScoreBasis("not_scored", 0)
    if not score.total_users:
        return ScoreBasis("no_users", 0)
    return ScoreBasis("users_mean", score.total_users)
