"""Whole-workspace figures behind the ranked lists of the read API and the dashboard: how many
accounts and users a workspace has scored (and not yet), the rank bookmarks of deep pages, and
the window of ids at a rank position. Each is cached for as long as the caller accepts.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from django.db import connections, router
from django.db.models import Exists, OuterRef, QuerySet

from engagement.models import (
    Account,
    AccountScore,
    ScoreFields,
    User,
    UserScore,
    Workspace,
)
from engagement.stored_json import read_account_filter
from engagement.traits import accounts_admitted
from engagement.workspace_cache import cached_for_workspace, scores_refreshed_at

T = TypeVar("T")


def score_computed_at(*, score: ScoreFields, workspace: Workspace) -> datetime | None:
    """When a score row's values were last computed; None for a row not scored yet.

    Every refresh of a workspace, full or incremental, re-evaluates all of its rows (p90, and
    with it any score, may move) but rewrites only those whose values changed, so a row's own
    write time (`computed_at`) can be much older than the figures it still correctly holds. The
    workspace's last refresh is that time; a row written after it (by hand, an import) keeps its
    own."""
    if not score.is_stored:
        return None
    refreshed_at = scores_refreshed_at(workspace)
    if refreshed_at is None or (score.computed_at and score.computed_at > refreshed_at):
        return score.computed_at
    return refreshed_at


def accounts_in_workspace(workspace: Workspace) -> QuerySet[Account]:
    """The product's accounts the workspace scores: all of them, or those its filter matches."""
    accounts = Account.objects.filter(product_id=workspace.product_id)
    return accounts_admitted(accounts, read_account_filter(workspace))


def unscored_accounts(workspace: Workspace) -> QuerySet[Account]:
    scored = AccountScore.objects.filter(workspace_id=workspace.id, account_id=OuterRef("pk"))
    return accounts_in_workspace(workspace).filter(~Exists(scored))


# A deep page starts from the nearest of these rank positions instead of walking the rank index
# from the top: the rank key at every BOOKMARK_EVERY-th position is cached like the totals.
BOOKMARK_EVERY = 1000

_BOOKMARKS_SQL = """
SELECT engagement_score, {target} FROM (
    SELECT engagement_score, {target},
           ROW_NUMBER() OVER (ORDER BY engagement_score DESC, {target}) - 1 AS position
    FROM {table} WHERE workspace_id = %s
) ranked
WHERE position %% %s = 0
ORDER BY position
"""


def rank_bookmarks(
    model: type[ScoreFields], target: str, workspace: Workspace, cache_seconds: int
) -> list:
    """[(score, target id)] at rank positions 0, BOOKMARK_EVERY, 2 * BOOKMARK_EVERY, ..."""

    def compute() -> list[tuple[int, int]]:
        # Table and column names come from the model, never from the request.
        sql = _BOOKMARKS_SQL.format(target=target, table=model._meta.db_table)
        # Raw SQL, routed like the ORM's reads (a read replica when one serves the read API).
        with connections[router.db_for_read(model)].cursor() as cursor:
            cursor.execute(sql, [workspace.id, BOOKMARK_EVERY])
            return [tuple(row) for row in cursor.fetchall()]

    key = f"bookmarks:{model._meta.model_name}:{BOOKMARK_EVERY}"
    return cached_for_workspace(key, workspace, compute, cache_seconds)


def ranked_window(
    model: type[AccountScore] | type[UserScore],
    target: str,
    workspace: Workspace,
    offset: int,
    limit: int,
    cache_seconds: int,
) -> QuerySet | list[int]:
    """The target ids (account_id or user_id) at rank positions [offset, offset + limit).

    Near the top: a subquery walking the rank index (an index-only scan), run inside the query
    that reads the rows. Deeper: from the nearest cached bookmark, two short index range scans
    (the rest of the bookmark's score tie, by id; then the lower scores).
    """
    scores = model.objects.filter(workspace_id=workspace.id)
    ranked = scores.order_by("-engagement_score", target)
    if offset < BOOKMARK_EVERY or cache_seconds <= 0:
        return ranked.values(target)[offset : offset + limit]
    bookmarks = rank_bookmarks(model, target, workspace, cache_seconds)
    index = offset // BOOKMARK_EVERY
    if index >= len(bookmarks):  # the ranking grew shorter since the bookmarks were taken
        return ranked.values(target)[offset : offset + limit]
    score, target_id = bookmarks[index]
    skip = offset - index * BOOKMARK_EVERY
    wanted = skip + limit
    ids = list(
        scores.filter(engagement_score=score, **{f"{target}__gte": target_id})
        .order_by(target)
        .values_list(target, flat=True)[:wanted]
    )
    if len(ids) < wanted:
        ids += list(
            scores.filter(engagement_score__lt=score)
            .order_by("-engagement_score", target)
            .values_list(target, flat=True)[: wanted - len(ids)]
        )
    return ids[skip:]


def account_counts(workspace: Workspace, cache_seconds: int) -> tuple[int, int, int]:
    """(scored, not yet scored, total) account counts of a workspace.

    Without an account filter every product account belongs to the workspace, so the accounts not
    scored yet are the difference of two cheap counts and the anti-join is skipped.
    """

    def count() -> tuple[int, int, int]:
        scored = AccountScore.objects.filter(workspace_id=workspace.id).count()
        if read_account_filter(workspace):
            unscored = unscored_accounts(workspace).count()
        else:
            product_total = Account.objects.filter(product_id=workspace.product_id).count()
            unscored = max(product_total - scored, 0)
        return scored, unscored, scored + unscored

    return cached_for_workspace("accounts", workspace, count, cache_seconds)


def user_counts(workspace: Workspace, cache_seconds: int) -> tuple[int, int]:
    """(scored, total) user counts of a workspace: every user of the product belongs to it."""

    def count() -> tuple[int, int]:
        scored = UserScore.objects.filter(workspace_id=workspace.id).count()
        total = User.objects.filter(product_id=workspace.product_id).count()
        return scored, max(total, scored)

    return cached_for_workspace("users", workspace, count, cache_seconds)
