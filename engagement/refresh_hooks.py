"""What a score refresh saw, announced to the apps that act on it (automations).

Engagement imports no other app, so an app registers a hook here from its AppConfig.ready(), the
way erasure hooks are registered (erasure_hooks.py). The refresh calls every hook in its own
transaction, after the scores and the segments are written and before it commits: a hook's rows
(a delivery to make) commit with the scores that caused them, or not at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class ScoresRefreshed:
    """One committed-to-be refresh of a workspace.

    `user_ids` and `account_ids` are the subjects whose score rows the refresh recomputed (their
    values may or may not have moved); None means every subject of the workspace (a full
    rescore). `baseline` is True when the scores moved for a reason that is not the subjects'
    own doing (the workspace's first scoring, or a change of its settings): a hook takes the new
    values as its starting point and fires nothing.
    """

    workspace_id: int
    now: datetime
    mode: str  # "full" or "incremental"
    baseline: bool
    user_ids: frozenset[int] | None
    account_ids: frozenset[int] | None


RefreshHook = Callable[[ScoresRefreshed], object]  # what a hook returns is not read

_hooks: list[RefreshHook] = []


def refresh_hook_register(hook: RefreshHook) -> None:
    if hook not in _hooks:
        _hooks.append(hook)


def refresh_hook_unregister(hook: RefreshHook) -> None:
    if hook in _hooks:
        _hooks.remove(hook)


def refresh_hooks_run(refreshed: ScoresRefreshed) -> None:
    for hook in list(_hooks):
        hook(refreshed)
