"""The segments every workspace starts with, as the hosted original names them: four score
bands, Red Hot and Ice Cold, Recently Inactive, Mature, Active Today and Multi-User; and Renewal
at risk, the paying Marketplace customers going cold before their renewal. They are
account segments written in the ordinary condition language (engagement/segment_conditions.py),
so they are edited, deleted and refreshed like any other; `builtin` only lists them first.
"""

from __future__ import annotations

from engagement.bands import BANDS, COLD_CHANGE, HOT_CHANGE, Band, band_by_key
from engagement.models import Segment, Workspace


def _metric(name: str, operator: str, value: object) -> dict:
    return {"field": f"metric:{name}", "operator": operator, "value": value}


def _band_conditions(band: Band) -> list[dict]:
    # Scores are whole numbers, so "greater than 74" is "75 and over".
    conditions = []
    if band.floor > BANDS[0].floor:
        conditions.append(_metric("engagement_score", "greater_than", band.floor - 1))
    if band.ceiling < BANDS[-1].ceiling:
        conditions.append(_metric("engagement_score", "less_than", band.ceiling + 1))
    return conditions


def _trait(name: str, operator: str, value: object) -> dict:
    return {"field": f"trait:{name}", "operator": operator, "value": value}


# Renewal at risk: an active commercial Marketplace license (the `am.` traits of
# marketplace/mapping.py, values as the Marketplace API spells them) whose maintenance ends after
# today and at most RENEWAL_DAYS days ahead, on an account scoring under 50 (the two lower bands)
# or cooling down (a change of COLD_CHANGE or lower). The dashboard's "MRR renewing at risk"
# sums the MRR of the accounts these conditions hold for.
RENEWAL_AT_RISK = "Renewal at risk"
RENEWAL_DAYS = 60
_HEALTHY_FLOOR = band_by_key("50-74").floor  # type: ignore[union-attr]  # a band of bands.py
RENEWAL_AT_RISK_CONDITIONS: list[dict] = [
    _trait("am.status", "equals", "active"),
    _trait("am.licenseType", "equals", "COMMERCIAL"),
    _trait("am.maintenanceEndDate", "within_next_days", RENEWAL_DAYS),
    {
        "any": [
            _metric("engagement_score", "less_than", _HEALTHY_FLOOR),
            _metric("score_change", "less_than", COLD_CHANGE + 1),
        ]
    },
]

# (name, conditions); the bands and the hot/cold rule are engagement/bands.py's, highest band
# first. Days count from the start of a day (UTC): "within the last 0 days" is today.
BUILTIN_SEGMENTS: tuple[tuple[str, list[dict]], ...] = (
    *((f"Score {band.label}", _band_conditions(band)) for band in reversed(BANDS)),
    ("Red Hot", [_metric("score_change", "greater_than", HOT_CHANGE - 1)]),
    ("Ice Cold", [_metric("score_change", "less_than", COLD_CHANGE + 1)]),
    (
        "Recently Inactive",
        [
            _metric("last_seen", "within_last_days", 60),
            _metric("last_seen", "more_than_days_ago", 30),
        ],
    ),
    ("Mature", [_metric("tenure_days", "greater_than", 180)]),
    ("Active Today", [_metric("last_seen", "within_last_days", 0)]),
    ("Multi-User", [_metric("total_users", "greater_than", 1)]),
    (RENEWAL_AT_RISK, RENEWAL_AT_RISK_CONDITIONS),
)


def builtin_segments_create(*, workspace: Workspace) -> list[Segment]:
    """Give a new workspace the built-in segments (their members come with its next refresh)."""
    return Segment.objects.bulk_create(
        Segment(
            workspace=workspace,
            name=name,
            target=Segment.Target.ACCOUNTS,
            conditions=conditions,
            builtin=True,
        )
        for name, conditions in BUILTIN_SEGMENTS
    )
