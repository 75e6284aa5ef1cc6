"""The scoring engine: fills UserScore and AccountScore of a workspace from the daily rollups.

- formula: the window, p90, the normalisation, tenure and percentile ranks, in Python;
- dialect: the same as SQL, for PostgreSQL and SQLite (the embedded mode);
- changes: whether a refresh is due and which users and accounts changed;
- demand: refreshes queued by the changes themselves, one at a time per workspace;
- refresh: a full rescore or an incremental refresh, under the workspace's lock;
- aggregation: rollups into per user and per account totals;
- writing: score rows; ranks: p90, re-normalisation and the percentile ranks read from the
  kept score histograms;
- run: the state and temporary tables of one refresh.
"""

from engagement.scoring.changes import workspace_config_digest, workspace_refresh_is_due
from engagement.scoring.demand import (
    refresh_demand_after,
    refresh_demand_busy,
    refresh_demand_note,
    refresh_demand_take,
    refresh_demands_stale_requeue,
    scores_refresh_soon,
    workspaces_to_sweep,
)
from engagement.scoring.dialect import Dialect
from engagement.scoring.formula import (
    HALF_UP_DECIMALS,
    ScoringWindow,
    percentile_90,
    round_half_up,
    score_from_raw,
    scoring_window,
    tenure_days,
)
from engagement.scoring.refresh import RefreshResult, workspace_refresh, workspace_rescore

__all__ = [
    "HALF_UP_DECIMALS",
    "Dialect",
    "RefreshResult",
    "ScoringWindow",
    "percentile_90",
    "refresh_demand_after",
    "refresh_demand_busy",
    "refresh_demand_note",
    "refresh_demand_take",
    "refresh_demands_stale_requeue",
    "round_half_up",
    "score_from_raw",
    "scores_refresh_soon",
    "scoring_window",
    "tenure_days",
    "workspace_config_digest",
    "workspace_refresh",
    "workspace_refresh_is_due",
    "workspace_rescore",
    "workspaces_to_sweep",
]
