"""License record -> `am.` account traits, and which license of a cloudId wins.

Only the fields below are ever read from a license; the individual contact fields (names,
emails, phones, addresses) and partner details never leave this module. `NA`, empty values and
`RTBF` redactions are not written; `Yes`/`No` become booleans; dates stay `YYYY-MM-DD` strings.
docs/marketplace.md lists every trait name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "am."

# license field -> trait name (values copied as strings, after the rules above)
_TOP_LEVEL = {
    # app details
    "addonName": "am.addonName",
    "addonKey": "am.addonKey",
    "productId": "am.productId",
    "appEdition": "am.appEdition",
    # license details
    "status": "am.status",
    "licenseType": "am.licenseType",
    "hosting": "am.hosting",
    "lastUpdated": "am.lastUpdated",
    "tier": "am.tier",
    # maintenance and evaluation dates
    "maintenanceStartDate": "am.maintenanceStartDate",
    "maintenanceEndDate": "am.maintenanceEndDate",
    "evaluationStartDate": "am.evaluationStartDate",
    "evaluationEndDate": "am.evaluationEndDate",
    "evaluationSaleDate": "am.evaluationSaleDate",
    # entitlement and license identifiers
    "appEntitlementId": "am.appEntitlementId",
    "appEntitlementNumber": "am.appEntitlementNumber",
    "hostEntitlementId": "am.hostEntitlementId",
    "hostEntitlementNumber": "am.hostEntitlementNumber",
    "addonLicenseId": "am.addonLicenseId",
    "licenseId": "am.licenseId",
    "hostLicenseId": "am.hostLicenseId",
    # parent product
    "parentProductName": "am.parentProductName",
    "parentProductEdition": "am.parentProductEdition",
    "parentProductBillingCycle": "am.parentProductBillingCycle",
    # site
    "installedOnSandbox": "am.installedOnSandbox",
    "cloudSiteHostname": "am.cloudSiteHostname",
    # data insights
    "evaluationOpportunitySize": "am.evaluationOpportunitySize",
    "evaluationLicense": "am.evaluationLicense",
    "daysToConvertEval": "am.daysToConvertEval",
}
# numbers sent as text: stored as numbers when they parse, so segments can compare them
_NUMERIC = {"am.evaluationOpportunitySize", "am.daysToConvertEval"}
_CONTACT = {"company": "am.company", "country": "am.country", "region": "am.region"}
_ATTRIBUTION = (
    "channel",
    "referrerDomain",
    "campaignSource",
    "campaignMedium",
    "campaignName",
    "campaignContent",
)
_NOT_A_VALUE = {"", "NA", "N/A", "RTBF"}
_TIER_NUMBER = re.compile(r"\d[\d,]*")


def _clean(value: object) -> object | None:
    """The value to store, or None when it is not to be written."""
    if value is None or isinstance(value, dict | list):
        return None
    if isinstance(value, bool | int | float):
        return value
    text = str(value).strip()
    if text.upper() in _NOT_A_VALUE:
        return None
    if text in {"Yes", "No"}:
        return text == "Yes"
    return text


def _number(value: object) -> object:
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() else number
    return value


def tier_number(tier: object) -> int | None:
    """The number in the tier text: "50 Users" -> 50, "10,000 Users" -> 10000; else None."""
    if not isinstance(tier, str):
        return None
    match = _TIER_NUMBER.search(tier)
    return int(match.group().replace(",", "")) if match else None


def license_traits(license: dict) -> dict:
    """The `am.` traits of one license record."""
    traits: dict = {}
    for field, name in _TOP_LEVEL.items():
        value = _clean(license.get(field))
        if value is not None:
            traits[name] = _number(value) if name in _NUMERIC else value
    number = tier_number(traits.get("am.tier"))
    if number is not None:
        traits["am.tier.number"] = number
    contact = license.get("contactDetails")
    if isinstance(contact, dict):
        for field, name in _CONTACT.items():
            value = _clean(contact.get(field))
            if value is not None:
                traits[name] = value
    attribution = license.get("attribution")
    if isinstance(attribution, dict):
        for field in _ATTRIBUTION:
            value = _clean(attribution.get(field))
            if value is not None:
                traits[f"am.attribution.{field}"] = value
    return traits


def license_ref(license: dict) -> str:
    """A stable identity for one license, to recognise it again in later syncs."""
    for field in ("appEntitlementId", "appEntitlementNumber", "addonLicenseId", "licenseId"):
        value = _clean(license.get(field))
        if isinstance(value, str):
            return f"{field}:{value}"[:200]
    return f"cloudId:{license.get('cloudId')}:{license.get('productId')}"[:200]


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


def license_rank(license: dict, ref: str) -> Rank:
    def text(field: str) -> str:
        value = _clean(license.get(field))
        return value if isinstance(value, str) else ""

    return Rank(
        active=text("status").lower() == "active",
        maintenance_end=text("maintenanceEndDate"),
        last_updated=text("lastUpdated"),
        ref=ref,
    )


def cloud_id(license: dict) -> str | None:
    """The account's tracking id, exactly as the marketplace sends it (no trimming)."""
    value = license.get("cloudId")
    if isinstance(value, str) and value.strip().upper() not in _NOT_A_VALUE:
        return value if len(value) <= 255 else None  # longer cannot be an account id
    return None
