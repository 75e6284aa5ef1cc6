"""Scores: live per workspace, the engine's state, and the daily history."""

from django.db import models

from engagement.fields import BreakdownField
from engagement.models.people import Account, User
from engagement.models.products import Workspace


class ScoringState(models.Model):
    """Where a workspace's scores stand: the engine's watermark and the normalisation inputs.

    Kept apart from Workspace so that a long rescore, which locks this row, never blocks an admin
    saving the workspace.
    """

    workspace = models.OneToOneField(
        Workspace, on_delete=models.CASCADE, primary_key=True, related_name="scoring_state"
    )
    # Rollups, users, accounts and links changed after this instant are not yet reflected.
    scored_through = models.DateTimeField(null=True, blank=True)
    # The last day of the window the scores were computed for; a new day means a full rescore.
    window_end = models.DateField(null=True, blank=True)
    # Digest of lookback, cap, filter and weights at the last full rescore.
    config_digest = models.CharField(max_length=64, blank=True, default="")
    # 90th percentile of the workspace's non-zero raw scores, now and one period earlier.
    p90 = models.FloatField(default=0)
    previous_p90 = models.FloatField(default=0)
    # When p90 was last taken over every score row (None: before this was kept). Incremental
    # refreshes take it again at most every SCORING_P90_SECONDS (engagement/scoring/ranks.py).
    p90_at = models.DateTimeField(null=True, blank=True)
    refreshed_at = models.DateTimeField(null=True, blank=True)
    full_rescored_at = models.DateTimeField(null=True, blank=True)
    last_refresh_ms = models.PositiveIntegerField(default=0)
    last_full_rescore_ms = models.PositiveIntegerField(default=0)
    # Whole-workspace figures, kept by each refresh as it writes the score rows (see
    # engagement/scoring/figures.py), so that the overview and the workspace stats read them here.
    # The product's users and accounts created up to `counted_through` (later ones are counted
    # when read); None: never counted.
    counted_through = models.DateTimeField(null=True, blank=True)
    product_users = models.PositiveIntegerField(default=0)
    product_accounts = models.PositiveIntegerField(default=0)
    # The workspace's score rows: users, users with events in the window, accounts, accounts
    # with an active user, and users and accounts per engagement score (the list's index is the
    # score; the incremental refresh ranks from them). An empty user_scores: not counted yet.
    scored_users = models.PositiveIntegerField(default=0)
    active_users = models.PositiveIntegerField(default=0)
    scored_accounts = models.PositiveIntegerField(default=0)
    active_accounts = models.PositiveIntegerField(default=0)
    account_scores = models.JSONField(default=list, blank=True)
    user_scores = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"scoring state of workspace {self.workspace_id}"


class RefreshDemand(models.Model):
    """Whether a refresh of the workspace is queued and not yet started, since when
    (engagement/scoring/demand.py). Apart from ScoringState, whose row a running refresh holds:
    a change marking the next refresh never waits for the one running."""

    workspace = models.OneToOneField(
        Workspace, on_delete=models.CASCADE, primary_key=True, related_name="refresh_demand"
    )
    queued_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # The queued refresh found the one before it still running: that one sends it as it commits
    # (refresh_demand_after) rather than leave it to its delayed task.
    behind_running = models.BooleanField(default=False, db_default=False)

    def __str__(self) -> str:
        return f"refresh of workspace {self.workspace_id} queued at {self.queued_at}"


class ScoreFields(models.Model):
    """Precomputed metrics the read API serves; every input of the score is here."""

    engagement_score = models.PositiveSmallIntegerField(default=0)  # 0-100
    score_change = models.SmallIntegerField(default=0)  # now minus one lookback period earlier
    raw_score = models.FloatField(default=0)  # sum of weights of events in the window
    # No percentile rank column: a rank depends only on the score and the workspace's score
    # histogram, and is read from it (scoring.ranks.workspace_percentile_ranks).
    active_days = models.PositiveSmallIntegerField(default=0)
    events_in_window = models.PositiveIntegerField(default=0)
    # Share (0-1) of the workspace's weighted event names used in the window.
    adoption = models.FloatField(default=0)
    last_seen = models.DateTimeField(null=True, blank=True)
    # [{"event": name, "count": n, "weight": w, "points": count * weight}]
    score_breakdown = BreakdownField()
    computed_at = models.DateTimeField(auto_now=True)
    # The same computation over the window one lookback period earlier: score_change is
    # engagement_score - previous_score.
    previous_raw_score = models.FloatField(default=0)
    previous_score = models.PositiveSmallIntegerField(default=0)
    # Whole days since the createdAt trait (an ISO 8601 date), else since first seen; None: unknown.
    tenure_days = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def is_stored(self) -> bool:
        """Whether this row was read from the table, rather than built for a user or account
        not scored yet (whose key, unlike a surrogate id, is set all the same)."""
        return not self._state.adding


# Score rows are derived data that only the scoring engine writes, from ids it has just joined
# against their tables; deleting a user, account or workspace still cascades (the ORM does it).
# Without database-level foreign keys a full rescore skips two deferred checks per row at commit
# (about 15 s for a million users). Two indexes per table, each write to a million rows paying
# for both: the primary key, (user or account, workspace), leading with the subject so that it
# also serves cascading deletes; and the ranking, leading with the workspace, which also serves
# every workspace-wide query. No surrogate id: its index was a third one to write (about 2 s of
# a rescore after a weight change, docs/benchmarks.md, 2026-11-28).


class UserScore(ScoreFields):
    pk = models.CompositePrimaryKey("user_id", "workspace_id")
    workspace = models.ForeignKey(
        Workspace,
        on_delete=models.CASCADE,
        related_name="user_scores",
        db_constraint=False,
        db_index=False,
    )
    user = models.ForeignKey(
        User, on_delete=models.CASCADE, related_name="scores", db_constraint=False, db_index=False
    )

    class Meta:
        indexes = [
            models.Index(
                fields=["workspace", "-engagement_score", "user"], name="user_score_rank_idx"
            )
        ]


class AccountScore(ScoreFields):
    pk = models.CompositePrimaryKey("account_id", "workspace_id")
    workspace = models.ForeignKey(
        Workspace,
        on_delete=models.CASCADE,
        related_name="account_scores",
        db_constraint=False,
        db_index=False,
    )
    account = models.ForeignKey(
        Account,
        on_delete=models.CASCADE,
        related_name="scores",
        db_constraint=False,
        db_index=False,
    )
    active_users = models.PositiveIntegerField(default=0)
    total_users = models.PositiveIntegerField(default=0)
    active_user_share = models.FloatField(default=0)  # 0-1

    class Meta:
        indexes = [
            models.Index(
                fields=["workspace", "-engagement_score", "account"],
                name="account_score_rank_idx",
            )
        ]


# Score history: one row per (user or account, workspace, past UTC day) whose score or raw score
# was not zero that day; a missing row reads as 0. Today's point is the live score row. Derived
# rows like the scores (no database foreign keys; deletes cascade through the ORM); the primary
# key leads with the user (or account) so that one's history is one index range and a cascading
# delete finds its rows, and a day's rows are inserted in that order, one pass over the index.


class UserScoreDay(models.Model):
    pk = models.CompositePrimaryKey("user_id", "workspace_id", "day")
    user = models.ForeignKey(
        User, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    day = models.DateField()
    engagement_score = models.PositiveSmallIntegerField()
    raw_score = models.FloatField()


class AccountScoreDay(models.Model):
    pk = models.CompositePrimaryKey("account_id", "workspace_id", "day")
    account = models.ForeignKey(
        Account, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    day = models.DateField()
    engagement_score = models.PositiveSmallIntegerField()
    raw_score = models.FloatField()


class ScoreHistoryState(models.Model):
    """How far a workspace's stored history goes, and under which settings it was computed."""

    workspace = models.OneToOneField(
        Workspace, on_delete=models.CASCADE, primary_key=True, related_name="score_history_state"
    )
    # Every past day from `built_from` to `built_through` is stored (None: never built).
    built_from = models.DateField(null=True, blank=True)
    built_through = models.DateField(null=True, blank=True)
    # Digest of lookback, cap, filter and weights the stored days were computed with.
    config_digest = models.CharField(max_length=64, blank=True, default="")
    # When the last run started.
    checked_through = models.DateTimeField(null=True, blank=True)
    last_run_ms = models.PositiveIntegerField(default=0)
    last_days = models.PositiveIntegerField(default=0)  # days recomputed by the last run
    # How long the last run took when late events made it recompute stored days, else 0: the
    # next such run waits as long again (engagement/history.py).
    last_backfill_ms = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"score history of workspace {self.workspace_id}"


class ScoreHistoryBackfill(models.Model):
    """A past day from which a workspace's stored history is stale: a batch of events of that
    day (or of it and later ones) was applied after the days were computed.

    Inserted by the apply path in the batch's own transaction, one row per workspace of the
    product (rows are only ever added there, so concurrent workers never wait on each other);
    deleted by the history run that recomputed from that day on (engagement/history.py). A row
    committed while a run is busy is not among those it read, so it stays for the next run.
    """

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_constraint=False
    )
    from_day = models.DateField()
    noted_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"history of workspace {self.workspace_id} stale from {self.from_day}"
