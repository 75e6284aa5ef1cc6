"""The scoring formula in Python: the window, the 90th percentile, the normalisation and tenure.

A user's raw score is the sum over events in the lookback window of weight(event), counting at
most `daily_event_cap` of one event per user per day. The score is 0 when raw is 0, else
max(1, round_half_up(100 * min(raw / p90, 1))), p90 being the 90th percentile of the workspace's
non-zero raw scores. An account scores the mean of the scores of all users linked to it. The
previous window (one lookback period earlier) is scored the same way; score_change is the
difference. The engine computes all of this in SQL (engagement/scoring/dialect.py builds the
expressions from the constants here); tests run the same cases through both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction

SCORE_MAX = 100
# A user with any weighted activity never scores 0, however far below p90.
SCORE_MIN_ACTIVE = 1

# Scores round half up on the value rounded to this many decimals first: floating point puts an
# exact half a hair below (100 * 23 / 36.800000000000004 = 62.49999999999999), and this rounds it
# back, far below the smallest gap between a real ratio of whole raw scores and a half.
HALF_UP_DECIMALS = 9

# Traits that say when a user or account started, first present one wins.
CREATED_AT_TRAITS = ("createdAt", "created_at")
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass(frozen=True, slots=True)
class ScoringWindow:
    """Inclusive UTC days: the lookback window ending today and the one before it."""

    start: date
    end: date
    previous_start: date
    previous_end: date


def scoring_window(*, lookback_days: int, today: date) -> ScoringWindow:
    """The window is the `lookback_days` most recent UTC days, today included (at least one: a
    lookback of 0, stored past the checks, would leave every score at 0)."""
    lookback_days = max(lookback_days, 1)
    start = today - timedelta(days=lookback_days - 1)
    previous_end = start - timedelta(days=1)
    return ScoringWindow(
        start=start,
        end=today,
        previous_start=previous_end - timedelta(days=lookback_days - 1),
        previous_end=previous_end,
    )


def percentile_90(values: Sequence[float]) -> float:
    """90th percentile by linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = 0.9 * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def round_half_up(value: float) -> int:
    """Nearest integer, halves up, after rounding to HALF_UP_DECIMALS decimals."""
    scale = 10**HALF_UP_DECIMALS
    return math.floor(round(value * scale) / scale + 0.5)


def score_from_raw(*, raw: float, p90: float) -> int:
    """A raw score normalised against the workspace's p90, rounding halves up."""
    if raw <= 0 or p90 <= 0:
        return 0
    if raw >= p90:
        return SCORE_MAX
    return max(SCORE_MIN_ACTIVE, round_half_up(SCORE_MAX * raw / p90))


def created_day(traits: dict) -> date | None:
    """The day a createdAt (or created_at) trait names: its leading ISO date, YYYY-MM-DD.

    The first of the two traits that is present and not null is read; anything else (a number,
    an impossible date such as 2024-02-31) gives None. The time and offset after the date are
    ignored: the SQL of a full rescore reads the same ten characters, so a subject's tenure does
    not change meaning once scored.
    """
    text = next((traits[name] for name in CREATED_AT_TRAITS if traits.get(name) is not None), None)
    if not isinstance(text, str) or not _ISO_DATE.match(text):
        return None
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None


def tenure_days(*, traits: dict, first_seen: datetime | None, now: datetime | None = None) -> int:
    """UTC calendar days from the createdAt day (else the first-seen day) to today, >= 0."""
    started = created_day(traits)
    if started is None and first_seen is not None:
        started = first_seen.astimezone(UTC).date()
    if started is None:
        return 0
    today = (now or datetime.now(UTC)).astimezone(UTC).date()
    return max((today - started).days, 0)


def percentile_ranks(histogram: Sequence[int]) -> tuple[float | None, ...]:
    """The percentile rank of each score 0-100, given how many rows of the workspace score each
    (`histogram`, indexed by score): 100 x (active rows scoring lower) / (active rows - 1), to
    one decimal, halves away from zero; 0 for the only active row. Active rows score above 0; a
    score of 0 has no rank (None), so a workspace's empty accounts lift nobody's rank.

    A rank depends on nothing but the score and the histogram, so it is read from this table
    rather than stored on each row: a refresh that moves a few thousand scores would otherwise
    rewrite the rank of most of a million rows (docs/scoring.md, "Percentile ranks").
    """
    counts = [max(int(count), 0) for count in histogram][: SCORE_MAX + 1]
    counts += [0] * (SCORE_MAX + 1 - len(counts))
    active = sum(counts[1:])
    denominator = active - 1 if active > 1 else 1
    ranks: list[float | None] = [None]
    lower = 0
    for score in range(1, SCORE_MAX + 1):
        # At most 100: a score above every row's (none scores it, so no row reads it) would
        # otherwise count all the active rows as lower.
        ranks.append(min(_tenths_half_up(Fraction(100 * lower, denominator)), 100.0))
        lower += counts[score]
    return tuple(ranks)


def _tenths_half_up(value: Fraction) -> float:
    """`value` (not negative) to one decimal, halves up."""
    tenths = math.floor(value * 10 + Fraction(1, 2))
    return tenths / 10
