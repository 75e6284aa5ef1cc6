"""Sales transactions and uninstall feedback -> rows to keep, and an account's revenue traits.

A transaction record is reduced to what the traits need (its identity, cloudId, license,
sale date and type, billing period, license type, vendorAmount, maintenance period); nothing
about the customer, its contacts or a partner is read. A feedback record keeps its day and
reasonKey, never the submitter or the message. Values follow the value types of mapping.py; a
record with a value breaking its rule is refused with the field and the reason
(`mapping.LicenseRejected`), and the sync counts it with the skipped licenses.

The traits (docs/marketplace.md lists each with its rule) are computed from every kept
transaction and uninstall of the account and its winning license, so they never depend on the
order or the run the records arrived in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Protocol

from marketplace.mapping import (
    DATE,
    ID,
    NUMBER,
    TEXT,
    LicenseRejected,
    cloud_id,
    normalise,
)

SALE_TYPES = ("new", "renewal", "upgrade", "downgrade", "refund")
REFUND = "refund"
MONTHLY, ANNUAL = "monthly", "annual"
UNINSTALL = "uninstall"
WINDOW_DAYS = 365  # am.vendorAmount12m: sales dated today and the 364 days before
AMOUNT_PLACES = Decimal("0.0001")  # as stored
CENT = Decimal("0.01")

LAST_SALE_DATE = "am.lastSaleDate"
LAST_SALE_TYPE = "am.lastSaleType"
BILLING_PERIOD = "am.billingPeriod"
MRR = "am.mrr"
VENDOR_AMOUNT_12M = "am.vendorAmount12m"
UNINSTALLED_AT = "am.uninstalledAt"
UNINSTALL_REASON = "am.uninstallReason"
REVENUE_TRAITS = (
    LAST_SALE_DATE, LAST_SALE_TYPE, BILLING_PERIOD, MRR, VENDOR_AMOUNT_12M, UNINSTALLED_AT,
    UNINSTALL_REASON,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Sale:
    """One transaction line as kept (the fields of marketplace.models.Transaction)."""

    transaction_id: str
    line_item_id: str
    cloud_id: str | None  # None: a server or data-center sale, which belongs to no account
    product_id: str | None
    entitlement: str  # appEntitlementId, else appEntitlementNumber, else ""
    sale_date: date
    sale_type: str
    billing_period: str  # monthly, annual or "" when not given
    license_type: str
    vendor_amount: Decimal  # USD; a refund's is negative
    maintenance_start: date | None
    maintenance_end: date | None
    last_updated: date | None


@dataclass(frozen=True, slots=True)
class Feedback:
    key: str
    feedback_type: str
    cloud_id: str
    entitlement: str
    product_id: str | None
    feedback_date: date
    reason_key: str


class SaleLike(Protocol):
    transaction_id: str
    line_item_id: str
    entitlement: str
    sale_date: date
    sale_type: str
    billing_period: str
    vendor_amount: Decimal
    maintenance_start: date | None
    maintenance_end: date | None


class UninstallLike(Protocol):
    feedback_date: date
    reason_key: str


def _section(record: dict, name: str) -> dict:
    section = record.get(name)
    if not isinstance(section, dict):
        what = "missing" if section is None else "not an object"
        raise LicenseRejected(name, f"{what} (expected an object)")
    return section


def _required(field: str, value: object, value_type: str):
    normalised = normalise(field, value, value_type)
    if normalised is None:
        raise LicenseRejected(field, "missing")
    return normalised


def _day(field: str, value: object) -> date | None:
    text = normalise(field, value, DATE)
    return date.fromisoformat(text) if isinstance(text, str) else None


def _entitlement(record: dict) -> str:
    for field in ("appEntitlementId", "appEntitlementNumber"):
        value = normalise(field, record.get(field), ID)
        if isinstance(value, str) and value:
            return value
    return ""


def transaction_map(record: object) -> Sale:
    """A transaction record as kept; raises LicenseRejected naming the field at fault."""
    if not isinstance(record, dict):
        raise LicenseRejected("transaction", "expected an object")
    details = _section(record, "purchaseDetails")
    sale_type = str(_required("purchaseDetails.saleType", details.get("saleType"), TEXT)).lower()
    if sale_type not in SALE_TYPES:
        raise LicenseRejected("purchaseDetails.saleType", f"not one of {', '.join(SALE_TYPES)}")
    period = normalise("purchaseDetails.billingPeriod", details.get("billingPeriod"), TEXT)
    period = str(period).lower() if period is not None else ""
    if period not in ("", MONTHLY, ANNUAL):
        raise LicenseRejected("purchaseDetails.billingPeriod", "not Monthly or Annual")
    amount = _required("purchaseDetails.vendorAmount", details.get("vendorAmount"), NUMBER)
    vendor_amount = Decimal(repr(amount) if isinstance(amount, float) else amount)
    vendor_amount = vendor_amount.quantize(AMOUNT_PLACES, ROUND_HALF_UP)
    if sale_type == REFUND:
        vendor_amount = -abs(vendor_amount)  # a refund always takes money back
    license_type = normalise("purchaseDetails.licenseType", details.get("licenseType"), TEXT)
    product = normalise("productId", record.get("productId"), ID)
    return Sale(
        transaction_id=str(_required("transactionId", record.get("transactionId"), ID)),
        line_item_id=str(
            _required("transactionLineItemId", record.get("transactionLineItemId"), ID)
        ),
        cloud_id=cloud_id(record),
        product_id=product if isinstance(product, str) else None,
        entitlement=_entitlement(record),
        sale_date=date.fromisoformat(
            _required("purchaseDetails.saleDate", details.get("saleDate"), DATE)
        ),
        sale_type=sale_type,
        billing_period=period,
        license_type=str(license_type).upper() if license_type is not None else "",
        vendor_amount=vendor_amount,
        maintenance_start=_day(
            "purchaseDetails.maintenanceStartDate", details.get("maintenanceStartDate")
        ),
        maintenance_end=_day(
            "purchaseDetails.maintenanceEndDate", details.get("maintenanceEndDate")
        ),
        last_updated=_day("lastUpdated", record.get("lastUpdated")),
    )


def transaction_label(record: object) -> str:
    """How to name a transaction in a skip reason (never raises)."""
    if not isinstance(record, dict):
        return "(not a transaction object)"
    parts = [record.get("transactionId"), record.get("transactionLineItemId")]
    texts = [str(p)[:60] for p in parts if isinstance(p, str | int) and not isinstance(p, bool)]
    return "transaction " + (ascii(" ".join(texts))[1:-1] if texts else "(no id)")


def feedback_map(record: object) -> Feedback:
    """An uninstall (or other) feedback record as kept; raises LicenseRejected."""
    if not isinstance(record, dict):
        raise LicenseRejected("feedback", "expected an object")
    feedback_type = str(_required("feedbackType", record.get("feedbackType"), TEXT)).lower()
    feedback_date = date.fromisoformat(_required("date", record.get("date"), DATE))
    reason = normalise("reasonKey", record.get("reasonKey"), TEXT)
    cloud = cloud_id(record) or ""
    entitlement = _entitlement(record)
    license_id = normalise("licenseId", record.get("licenseId"), ID) or ""
    product = normalise("productId", record.get("productId"), ID)
    # No id is documented: these fields tell two feedbacks apart.
    identity = "\x1f".join(
        [feedback_type, feedback_date.isoformat(), cloud, entitlement, str(license_id),
         str(reason or "")]
    )  # fmt: skip
    return Feedback(
        key=hashlib.sha256(identity.encode()).hexdigest(),
        feedback_type=feedback_type,
        cloud_id=cloud,
        entitlement=entitlement,
        product_id=product if isinstance(product, str) else None,
        feedback_date=feedback_date,
        reason_key=str(reason) if reason is not None else "",
    )


def feedback_label(record: object) -> str:
    if not isinstance(record, dict):
        return "(not a feedback object)"
    for field in ("appEntitlementId", "appEntitlementNumber", "cloudId", "licenseId"):
        value = record.get(field)
        if isinstance(value, str) and value.strip():
            return f"feedback {field} {ascii(value[:60])[1:-1]}"
    return "feedback (no license id)"


# --- the traits -------------------------------------------------------------------------------
def money(amount: Decimal) -> float:
    """USD as a JSON number rounded to the cent (never -0.0)."""
    return float(amount.quantize(CENT, ROUND_HALF_UP)) + 0.0


def _order(sale: SaleLike) -> tuple:
    # The latest transaction: by sale date; on one day a refund comes after what it refunds.
    return (sale.sale_date, sale.sale_type == REFUND, sale.transaction_id, sale.line_item_id)


def _same_license(a: SaleLike, b: SaleLike) -> bool:
    return not a.entitlement or not b.entitlement or a.entitlement == b.entitlement


def _covers(sale: SaleLike, refund: SaleLike) -> bool:
    """The refund's maintenance period matches the sale's: the same start, or a start inside
    the sale's period (a partial refund of its remainder)."""
    start = refund.maintenance_start
    if start is None or sale.maintenance_start is None:
        return False
    if start == sale.maintenance_start:
        return True
    end = sale.maintenance_end
    return end is not None and sale.maintenance_start <= start < end


def refunded_amounts(sales: Sequence[SaleLike]) -> dict[int, Decimal]:
    """What was refunded of each sale (by its index in `sales`, a negative sum): a refund line
    refunds the latest earlier non-refund sale of the same license whose maintenance period it
    matches; one matching none refunds no particular sale (it still counts in the 12 months)."""
    refunded: dict[int, Decimal] = {}
    paid = [(i, s) for i, s in enumerate(sales) if s.sale_type != REFUND]
    for refund in (s for s in sales if s.sale_type == REFUND):
        matches = [
            (i, s)
            for i, s in paid
            if s.sale_date <= refund.sale_date and _same_license(s, refund) and _covers(s, refund)
        ]
        if matches:
            index, _ = max(matches, key=lambda pair: _order(pair[1]))
            refunded[index] = refunded.get(index, Decimal(0)) + refund.vendor_amount
    return refunded


def _period(sale: SaleLike) -> str:
    """The sale's billing period; when not given, its maintenance period's length says."""
    if sale.billing_period:
        return sale.billing_period
    if sale.maintenance_start and sale.maintenance_end:
        days = (sale.maintenance_end - sale.maintenance_start).days
        return ANNUAL if days > 62 else MONTHLY
    return ""


def revenue_traits(
    *,
    license_traits: dict,
    sales: Sequence[SaleLike],
    uninstalls: Iterable[UninstallLike],
    today: date,
) -> dict:
    """The revenue traits of one account: its transactions, its uninstall feedback and the
    traits of its winning license (which license is active and commercial)."""
    traits: dict = {}
    status = license_traits.get("am.status")
    kind = license_traits.get("am.licenseType")
    commercial_and_active = (
        isinstance(status, str) and status.lower() == "active"
        and isinstance(kind, str) and kind.upper() == "COMMERCIAL"
    )  # fmt: skip
    if sales:
        ordered = sorted(sales, key=_order)
        latest = ordered[-1]
        traits[LAST_SALE_DATE] = latest.sale_date.isoformat()
        traits[LAST_SALE_TYPE] = latest.sale_type
        period = next((_period(s) for s in reversed(ordered) if _period(s)), "")
        if period:
            traits[BILLING_PERIOD] = period
        since = today - timedelta(days=WINDOW_DAYS - 1)
        in_window = [s.vendor_amount for s in ordered if since <= s.sale_date <= today]
        traits[VENDOR_AMOUNT_12M] = money(sum(in_window, Decimal(0)))
    if not commercial_and_active:
        traits[MRR] = 0.0
    else:
        own_ids = {
            value
            for value in (
                license_traits.get("am.appEntitlementId"),
                license_traits.get("am.appEntitlementNumber"),
            )
            if isinstance(value, str)
        }
        own = [s for s in sales if not s.entitlement or not own_ids or s.entitlement in own_ids]
        refunded = refunded_amounts(own)
        paid = [(i, s) for i, s in enumerate(own) if s.sale_type != REFUND]
        if paid:
            index, sale = max(paid, key=lambda pair: _order(pair[1]))
            net = sale.vendor_amount + refunded.get(index, Decimal(0))
            period = _period(sale)
            if net <= 0:
                traits[MRR] = 0.0  # the latest sale was refunded
            elif period == MONTHLY:
                traits[MRR] = money(net)
            elif period == ANNUAL:
                traits[MRR] = money(net / 12)
    latest_uninstall = max(uninstalls, key=lambda u: (u.feedback_date, u.reason_key), default=None)
    if latest_uninstall is not None:
        traits[UNINSTALLED_AT] = latest_uninstall.feedback_date.isoformat()
        if latest_uninstall.reason_key:
            traits[UNINSTALL_REASON] = latest_uninstall.reason_key
    return traits
