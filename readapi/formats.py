"""How the read API writes values (docs/read-api.md "Record format"): times as `timestamp()`
text, whole-number metrics as integers, shares and ranks rounded by `rounded_fraction`, and JSON
columns as the read selectors render them."""

import math
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import overload

from rest_framework import serializers


@overload
def timestamp(value: datetime) -> str: ...
@overload
def timestamp(value: None) -> None: ...
@overload
def timestamp(value: datetime | None) -> str | None: ...
def timestamp(value: datetime | None) -> str | None:
    """A time as every read API field carries it: ISO 8601 in UTC with microseconds,
    `2026-11-23T10:15:00.123456Z` (a naive time is taken as UTC)."""
    if value is None:
        return None
    value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return f"{value.replace(tzinfo=None).isoformat(timespec='microseconds')}Z"


class TimestampField(serializers.DateTimeField):
    """A date-time field rendered by `timestamp()`."""

    def to_representation(self, value: datetime) -> str:
        # DRF writes a None attribute as null without calling this.
        return timestamp(value)


def _finite(value: object) -> float | None:
    """A stored number as JSON can carry it: NaN and infinities (PostgreSQL stores them), and
    anything that is not a number, as null."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond a double, in an old breakdown
        return None
    return number if math.isfinite(number) else None


def whole_number(value: object) -> int | None:
    """A metric the formula makes a whole number (weights and counts are whole), as an integer;
    a stored fraction (an import) rounds half up."""
    number = _finite(value)
    return None if number is None else math.floor(number + 0.5)


def rounded_fraction(value: object, places: int) -> float | None:
    """A fraction rounded half up to `places` decimals, as its shortest decimal text reads."""
    number = _finite(value)
    if number is None:
        return None
    exact = Decimal(repr(number)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return float(exact)


RANK_DECIMALS = 1  # percentile_rank
SHARE_DECIMALS = 4  # adoption, active_user_share


class _ReadWith:
    """A field whose value is `read(instance)`: a JSON column as the read selectors render it
    (they load it as text, so it is never decoded on the way, see engagement.selectors)."""

    def __init__(self, *args, read, **kwargs) -> None:
        self.read = read
        super().__init__(*args, **kwargs)

    def get_attribute(self, instance):
        return self.read(instance)


class ReadDictField(_ReadWith, serializers.DictField):
    pass


class ReadListField(_ReadWith, serializers.ListField):
    pass
