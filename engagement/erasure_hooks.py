"""Erasure of what other apps hold about a person, through hooks they register.

Ingestion keeps accepted-but-unapplied messages, the drop log and seen messageIds; engagement
imports no other app, so each app registers a hook here from its AppConfig.ready(), and an
erasure calls every hook in its transaction. A hook returns what it removed, by kind of row.

A hook runs at one of two stages (see docs/erasure.md, "Lock order"):

- `ErasureStage.BEFORE_TARGET`: before the erasure locks the user's or account's row, for rows
  that the ingestion worker locks before it locks users and accounts (its waiting messages).
  Taking them in the worker's order is what keeps an erasure and a drain from deadlocking.
- `ErasureStage.AFTER_TARGET`: once the row is locked and erased, for everything else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class ErasureTarget:
    """Who is being erased: kept in memory only while the erasure runs, never stored."""

    product_id: int
    kind: str  # Erasure.Kind: "user" or "account"
    tracking_id: str
    email: str  # "" for an account, or a user without one


class ErasureStage(StrEnum):
    BEFORE_TARGET = "before_target"
    AFTER_TARGET = "after_target"


ErasureHook = Callable[[ErasureTarget], dict[str, int]]

_hooks: dict[ErasureStage, list[ErasureHook]] = {stage: [] for stage in ErasureStage}


def erasure_hook_register(
    hook: ErasureHook, *, stage: ErasureStage = ErasureStage.AFTER_TARGET
) -> None:
    if hook not in _hooks[stage]:
        _hooks[stage].append(hook)


def erasure_hook_unregister(hook: ErasureHook) -> None:
    for hooks in _hooks.values():
        if hook in hooks:
            hooks.remove(hook)


def erasure_hooks_run(
    target: ErasureTarget, stage: ErasureStage = ErasureStage.AFTER_TARGET
) -> dict[str, int]:
    """Every hook of the stage, its counts added together."""
    counts: dict[str, int] = {}
    for hook in _hooks[stage]:
        for name, removed in hook(target).items():
            counts[name] = counts.get(name, 0) + removed
    return counts
