"""The one band rule and the one hot/cold rule of an engagement score, used by every place that
shows or acts on them: the overview's chart, the account list's filter, the built-in segments,
the `band_entered` and `score_changed` triggers, Slack, the CSV and the docs.

Four health bands of a 0-100 score, as the hosted original's built-in segments draw them (under
25, 25-49, 50-74, 75 and over); a score that rose by HOT_CHANGE points or more since the previous
period is heating up ("Red Hot"), one that fell by as many is cooling down ("Ice Cold").
"""

from __future__ import annotations

from dataclasses import dataclass

HOT_CHANGE = 10
COLD_CHANGE = -10


@dataclass(frozen=True, slots=True)
class Band:
    key: str  # in query strings (?band=25-49) and the CSV
    label: str  # on pages and in messages ("Score under 25" names its built-in segment)
    floor: int
    ceiling: int

    def holds(self, score: int) -> bool:
        return self.floor <= score <= self.ceiling


# Lowest first; together they cover 0-100 once each.
BANDS: tuple[Band, ...] = (
    Band("under-25", "under 25", 0, 24),
    Band("25-49", "25-49", 25, 49),
    Band("50-74", "50-74", 50, 74),
    Band("75-and-over", "75 and over", 75, 100),
)
BAND_FLOORS: tuple[int, ...] = tuple(band.floor for band in reversed(BANDS))  # highest first


def band_of(score: int) -> Band:
    """The band of a score; below 0 counts as the lowest, above 100 as the highest."""
    for band in reversed(BANDS):
        if score >= band.floor:
            return band
    return BANDS[0]


def band_by_key(key: str) -> Band | None:
    return next((band for band in BANDS if band.key == key), None)


def is_hot(change: int | None) -> bool:
    return change is not None and change >= HOT_CHANGE


def is_cold(change: int | None) -> bool:
    return change is not None and change <= COLD_CHANGE


def heat(change: int | None) -> str:
    """ "hot", "cold" or "" for a score change."""
    return "hot" if is_hot(change) else "cold" if is_cold(change) else ""
