"""License record -> `am.` account traits, and which license of a cloudId wins.

Every field read from a license has a value type, and each value type one rule
(docs/marketplace.md lists them all):

- not a value: missing, null, "", "NA", "N/A" or "RTBF" (any case) -> the trait is not written;
- id: text, or a whole number written as its digits -> text;
- text: text -> text, trimmed;
- date: "YYYY-MM-DD" (a longer ISO timestamp keeps its date) that is a real day -> "YYYY-MM-DD";
- boolean: true/false, "Yes"/"No", "true"/"false", "1"/"0" (any case) -> true/false;
- number: a finite number, or text holding one (at most 15 significant digits) -> a number.

Text of every value type must fit what ingestion itself accepts: at most 255 characters, no
NUL, no lone surrogate; the traits of one license at most 32 KiB as JSON. A license with a value
that breaks its rule is not stored at all: `LicenseRejected` names the field and the reason, and
the sync counts it. The individual contact fields (names, emails, phones, addresses) and partner
details are never read.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import date

from engagement.presentation import MARKETPLACE_PREFIX
from marketplace.client import BadNumber

PREFIX = MARKETPLACE_PREFIX
MAX_TEXT = 255  # ingestion's limit for ids and trait names
MAX_TRAITS_BYTES = 32 * 1024  # ingestion's limit for one message's traits, as JSON
MAX_DIGITS = 15  # a number beyond this many significant digits is not exact in JSON readers
MAX_REF = 320

ID, TEXT, DATE, BOOLEAN, NUMBER = "id", "text", "date", "boolean", "number"

# license field -> (trait name, value type)
_TOP_LEVEL: dict[str, tuple[str, str]] = {
    # app details
    "addonName": ("am.addonName", TEXT),
    "addonKey": ("am.addonKey", ID),
    "productId": ("am.productId", ID),
    "appEdition": ("am.appEdition", TEXT),
    # license details
    "status": ("am.status", TEXT),
    "licenseType": ("am.licenseType", TEXT),
    "hosting": ("am.hosting", TEXT),
    "lastUpdated": ("am.lastUpdated", DATE),
    "tier": ("am.tier", TEXT),
    # maintenance and evaluation dates
    "maintenanceStartDate": ("am.maintenanceStartDate", DATE),
    "maintenanceEndDate": ("am.maintenanceEndDate", DATE),
    "evaluationStartDate": ("am.evaluationStartDate", DATE),
    "evaluationEndDate": ("am.evaluationEndDate", DATE),
    "evaluationSaleDate": ("am.evaluationSaleDate", DATE),
    # entitlement and license identifiers
    "appEntitlementId": ("am.appEntitlementId", ID),
    "appEntitlementNumber": ("am.appEntitlementNumber", ID),
    "hostEntitlementId": ("am.hostEntitlementId", ID),
    "hostEntitlementNumber": ("am.hostEntitlementNumber", ID),
    "addonLicenseId": ("am.addonLicenseId", ID),
    "licenseId": ("am.licenseId", ID),
    "hostLicenseId": ("am.hostLicenseId", ID),
    # parent product
    "parentProductName": ("am.parentProductName", TEXT),
    "parentProductEdition": ("am.parentProductEdition", TEXT),
    "parentProductBillingCycle": ("am.parentProductBillingCycle", TEXT),
    # site
    "installedOnSandbox": ("am.installedOnSandbox", BOOLEAN),
    "cloudSiteHostname": ("am.cloudSiteHostname", TEXT),
    # data insights
    "evaluationOpportunitySize": ("am.evaluationOpportunitySize", NUMBER),
    "evaluationLicense": ("am.evaluationLicense", ID),
    "daysToConvertEval": ("am.daysToConvertEval", NUMBER),
}
CONVERTED_TRAIT = "am.convertedFromEvaluation"
COMPANY_TRAIT = "am.company"  # also the name of an account the service knows only from licenses
_CONTACT = {"company": COMPANY_TRAIT, "country": "am.country", "region": "am.region"}
_ATTRIBUTION = (
    "channel",
    "referrerDomain",
    "campaignSource",
    "campaignMedium",
    "campaignName",
    "campaignContent",
)
# The fields that identify a license, best first.
REF_FIELDS = ("appEntitlementId", "appEntitlementNumber", "addonLicenseId", "licenseId")
_NOT_A_VALUE = {"", "NA", "N/A", "RTBF"}
_TRUE, _FALSE = {"yes", "true", "1"}, {"no", "false", "0"}
_DECIMAL = re.compile(r"[+-]?(\d+)(?:\.(\d+))?")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ].*)?", re.S)
_TIER_NUMBER = re.compile(r"\d[\d,]*")


class LicenseRejected(Exception):
    """A value breaks its field's rule: the license is skipped, and this says why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _text_problem(text: str) -> str | None:
    if len(text) > MAX_TEXT:
        return f"longer than {MAX_TEXT} characters ({len(text):,})"
    if "\x00" in text:
        return "contains a NUL character"
    if any("\ud800" <= char <= "\udfff" for char in text):
        return "contains a lone surrogate (not valid Unicode)"
    return None


def normalise(field: str, value: object, value_type: str) -> str | int | float | bool | None:
    """The value to store under this field's rule; None when there is nothing to write.

    Raises LicenseRejected when the value breaks the rule.
    """
    if value is None:
        return None
    if isinstance(value, BadNumber):
        raise LicenseRejected(field, f"a number no column can hold ({value.text})")
    if isinstance(value, str):
        if value.strip().upper() in _NOT_A_VALUE:
            return None
        problem = _text_problem(value)
        if problem:
            raise LicenseRejected(field, problem)
        text = value if value_type == ID else value.strip()
        return _from_text(field, text, value_type)
    if isinstance(value, bool):
        if value_type == BOOLEAN:
            return value
        raise LicenseRejected(field, f"expected {value_type}, got a boolean")
    if isinstance(value, int):
        if value_type == NUMBER:
            return _checked_number(field, value)
        if value_type in (ID, TEXT):
            if value.bit_length() > 850 or len(str(value)) > MAX_TEXT:  # 850 bits: ~256 digits
                raise LicenseRejected(field, f"a number longer than {MAX_TEXT} characters")
            return str(value)
        raise LicenseRejected(field, f"expected {value_type}, got a number")
    if isinstance(value, float) and value_type == NUMBER:
        return _checked_number(field, value)
    raise LicenseRejected(field, f"expected {value_type}, got {_json_type(value)}")


def _from_text(field: str, text: str, value_type: str) -> str | int | float | bool:
    if value_type in (ID, TEXT):
        return text
    if value_type == BOOLEAN:
        lowered = text.lower()
        if lowered in _TRUE or lowered in _FALSE:
            return lowered in _TRUE
        raise LicenseRejected(field, "expected Yes/No or true/false")
    if value_type == DATE:
        match = _DATE.fullmatch(text)
        if match:
            try:
                return date(*(int(part) for part in match.groups())).isoformat()
            except ValueError:
                pass
        raise LicenseRejected(field, "not a date (YYYY-MM-DD)")
    match = _DECIMAL.fullmatch(text)  # NUMBER
    if not match:
        raise LicenseRejected(field, "not a number")
    digits = (match.group(1).lstrip("0") or "0") + (match.group(2) or "").rstrip("0")
    if len(digits) > MAX_DIGITS:
        raise LicenseRejected(field, f"a number of more than {MAX_DIGITS} digits")
    number = float(text)
    return int(number) if number.is_integer() else number


def _checked_number(field: str, number: int | float) -> int | float:
    if abs(number) >= 10**MAX_DIGITS:
        raise LicenseRejected(field, f"a number of more than {MAX_DIGITS} digits")
    return number


def _json_type(value: object) -> str:
    return {dict: "an object", list: "a list", float: "a fraction"}.get(type(value), "a value")


def tier_number(tier: object) -> int | None:
    """The number in the tier text: "50 Users" -> 50, "10,000 Users" -> 10000; else None.

    None also when the number has more digits than a JSON number keeps exactly.
    """
    if not isinstance(tier, str):
        return None
    match = _TIER_NUMBER.search(tier)
    if not match:
        return None
    digits = match.group().replace(",", "")
    return int(digits) if len(digits.lstrip("0")) <= MAX_DIGITS else None


def license_traits(license: dict) -> dict:
    """The `am.` traits of one license record; raises LicenseRejected."""
    traits: dict = {}
    for field, (name, value_type) in _TOP_LEVEL.items():
        value = normalise(field, license.get(field), value_type)
        if value is not None:
            traits[name] = value
    number = tier_number(traits.get("am.tier"))
    if number is not None:
        traits["am.tier.number"] = number
    # A converted evaluation: a number of days in daysToConvertEval and the day it converted in
    # evaluationSaleDate ("NA" in both when it did not).
    traits[CONVERTED_TRAIT] = "am.daysToConvertEval" in traits and "am.evaluationSaleDate" in traits
    for group, fields in (
        ("contactDetails", {field: name for field, name in _CONTACT.items()}),
        ("attribution", {field: f"am.attribution.{field}" for field in _ATTRIBUTION}),
    ):
        section = license.get(group)
        if section is None:
            continue
        if not isinstance(section, dict):
            raise LicenseRejected(group, f"expected an object, got {_json_type(section)}")
        for field, name in fields.items():
            value = normalise(f"{group}.{field}", section.get(field), TEXT)
            if value is not None:
                traits[name] = value
    size = len(json.dumps(traits, ensure_ascii=False).encode())
    if size > MAX_TRAITS_BYTES:
        raise LicenseRejected("traits", f"{size:,} bytes as JSON, over {MAX_TRAITS_BYTES:,}")
    return traits


def cloud_id(license: dict) -> str | None:
    """The account's tracking id, exactly as sent (a whole number as its digits); None when the
    license has none (server, data center). Raises LicenseRejected for one that cannot be an
    account id (too long, NUL, not text)."""
    value = normalise("cloudId", license.get("cloudId"), ID)
    return value if isinstance(value, str) else None


def license_ref(license: dict) -> str:
    """A stable identity for one license, to recognise it again in later syncs.

    Ids are compared as text, so a license id sent as a number is still its own license.
    """
    for field in REF_FIELDS:
        value = normalise(field, license.get(field), ID)
        if isinstance(value, str) and value:
            return f"{field}:{value}"
    fallback = f"cloudId:{cloud_id(license)}:{normalise('productId', license.get('productId'), ID)}"
    if len(fallback) <= MAX_REF:
        return fallback
    return "sha256:" + hashlib.sha256(fallback.encode()).hexdigest()


def license_label(license: object) -> str:
    """How to name a license in a skip reason, whatever its fields hold (never raises)."""
    if not isinstance(license, dict):
        return "(not a license object)"
    for field in (*REF_FIELDS, "cloudId"):
        value = license.get(field)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and value.strip():
            if _text_problem(value) is None:
                return f"{field} {value}"
            return f"{field} {ascii(value[:60])}"
    return "(no license id)"


@dataclass(frozen=True, slots=True, order=True)
class Rank:
    """Several licenses for one cloudId: the active one wins, then the latest maintenance end.

    Later `lastUpdated`, then the license reference, break the remaining ties so the winner
    never depends on the order licenses arrive in.
    """

    active: bool
    maintenance_end: str
    last_updated: str
    ref: str


def license_rank(traits: dict, ref: str) -> Rank:
    """The rank of a license from its mapped traits."""
    status = traits.get("am.status")
    return Rank(
        active=isinstance(status, str) and status.lower() == "active",
        maintenance_end=traits.get("am.maintenanceEndDate", ""),
        last_updated=traits.get("am.lastUpdated", ""),
        ref=ref,
    )


@dataclass(frozen=True, slots=True)
class MappedLicense:
    ref: str
    cloud_id: str | None  # None: no cloudId (server, data center)
    rank: Rank
    traits: dict


def license_map(license: object) -> MappedLicense:
    """Everything the sync stores of one license record; raises LicenseRejected."""
    if not isinstance(license, dict):
        raise LicenseRejected("license", f"expected an object, got {_json_type(license)}")
    cloud = cloud_id(license)
    traits = license_traits(license)
    ref = license_ref(license)
    return MappedLicense(ref=ref, cloud_id=cloud, rank=license_rank(traits, ref), traits=traits)
