"""Money as the dashboard shows it: in US dollars (the Marketplace reports and the `am.mrr` trait
are USD), with the currency sign and thousands separators, to the cent or to the whole dollar,
never abbreviated ("$3,352.94", "$3,353", not "3.4k"). No amount is "–", never "$0".
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

NO_AMOUNT = "–"  # an en dash: no amount known, as opposed to an amount of $0.00
_CENT = Decimal("0.01")
_DOLLAR = Decimal("1")


def amount_of(value: object) -> Decimal | None:
    """A trait's value as an amount: a JSON number (not a boolean, not a text), to the cent;
    None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return None
    try:
        amount = Decimal(str(value)).quantize(_CENT, rounding=ROUND_HALF_UP)
    except InvalidOperation:  # inf, nan, or beyond what the quantum can hold
        return None
    return amount if amount.is_finite() else None


def money_text(amount: Decimal | float | int | None, *, cents: bool = True) -> str:
    """The amount as "$3,352.94" (cents) or "$3,353" (whole dollars, rounded half up); NO_AMOUNT
    for None."""
    if amount is None:
        return NO_AMOUNT
    value = Decimal(str(amount)).quantize(_CENT if cents else _DOLLAR, rounding=ROUND_HALF_UP)
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value):,.{2 if cents else 0}f}"


def csv_amount(amount: Decimal | None) -> str:
    """An amount in a CSV cell: a plain number to the cent ("3352.94"; the column's name says
    the currency), empty for no amount, so that a spreadsheet reads it as a number."""
    return "" if amount is None else f"{amount:.2f}"
