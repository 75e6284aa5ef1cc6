"""Erasure of what other apps hold about a person, through hooks they register.

Ingestion keeps accepted-but-unapplied messages, the drop log and seen messageIds; engagement
imports no other app, so each app registers a hook here from its AppConfig.ready(), and an
erasure calls every hook in its transaction. A hook returns what it removed, by kind of row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ErasureTarget:
    """Who is being erased: kept in memory only while the erasure runs, never stored."""

    product_id: int
    kind: str  # Erasure.Kind: "user" or "account"
    tracking_id: str
    email: str  # "" for an account, or a user without one


ErasureHook = Callable[[ErasureTarget], dict[str, int]]

_hooks: list[ErasureHook] = []


def erasure_hook_register(hook: ErasureHook) -> None:
    if hook not in _hooks:
        _hooks.append(hook)


def erasure_hooks_run(target: ErasureTarget) -> dict[str, int]:
    """Every registered hook's counts, added together."""
    counts: dict[str, int] = {}
    for hook in _hooks:
        for name, removed in hook(target).items():
            counts[name] = counts.get(name, 0) + removed
    return counts
