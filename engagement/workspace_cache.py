"""Whole-workspace figures (counts, rank bookmarks, the dashboard's overview) kept in the shared
cache for a few seconds, with one rule for when they start afresh, for the read API and the
dashboard alike.

Counting 100,000 rows costs more than serving the page itself, and the scores behind the figures
refresh about once a minute anyway, so a figure a few seconds old is the better trade. A figure is
keyed by the workspace's `updated_at` (saving its settings starts afresh) and its last score
refresh: a refresh moves accounts and users from "not scored yet" to "scored", and a split counted
before it would point a page at rows that are no longer where it looks (an empty page under a
non-zero total), or show an overview of the scores before it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django.core.cache import cache
from django.db.models import OuterRef, QuerySet, Subquery

from engagement.models import ScoringState, Workspace

T = TypeVar("T")

_NOT_SELECTED = object()


def with_scores_refreshed_at(workspaces: QuerySet[Workspace]) -> QuerySet[Workspace]:
    """`workspaces`, each with `scores_refreshed_at` (its last score refresh, None: never), read
    in the same query, so the cache key costs no query of its own."""
    refreshed_at = ScoringState.objects.filter(workspace_id=OuterRef("pk")).values("refreshed_at")
    return workspaces.annotate(scores_refreshed_at=Subquery(refreshed_at[:1]))


def scores_refreshed_at(workspace: Workspace) -> datetime | None:
    """When the workspace's scores were last refreshed (None: never), from the annotation of
    `with_scores_refreshed_at`, else from its ScoringState."""
    refreshed_at: Any = getattr(workspace, "scores_refreshed_at", _NOT_SELECTED)
    if refreshed_at is _NOT_SELECTED:
        refreshed_at = (
            ScoringState.objects.filter(workspace_id=workspace.id)
            .values_list("refreshed_at", flat=True)
            .first()
        )
    return refreshed_at


def cached_for_workspace(
    name: str, workspace: Workspace, compute: Callable[[], T], seconds: int
) -> T:
    """`compute()`, a figure of the whole workspace, cached for `seconds` (0: not cached) until the
    workspace's settings change or its scores refresh, whichever comes first."""
    if seconds <= 0:
        return compute()
    refreshed_at = scores_refreshed_at(workspace)
    refreshed = refreshed_at.timestamp() if refreshed_at else 0
    key = f"eds:{name}:{workspace.id}:{workspace.updated_at.timestamp()}:{refreshed}"
    found = cache.get(key)
    if found is None:
        found = compute()
        cache.set(key, found, seconds)
    return found
