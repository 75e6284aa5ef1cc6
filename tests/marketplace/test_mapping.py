"""License record -> am. traits: the documented subset, NA and empty skipped, no contact fields."""

import json

import pytest

from marketplace import mapping
from marketplace.client import BadNumber
from marketplace.mapping import (
    LicenseRejected,
    license_label,
    license_map,
    license_ref,
    license_traits,
    tier_number,
)
from tests.marketplace.conftest import cloud_license


def test_documented_cloud_license_becomes_these_traits():
    record = cloud_license(
        "c-1",
        attribution={"channel": "Paid search", "campaignName": "NA", "referrerDomain": ""},
        hostEntitlementId="host-1",
        newBillingSystem=True,
        partnerDetails={"partnerName": "Partner Co", "billingContact": {"email": "p@x.example"}},
    )
    assert license_traits(record) == {
        "am.addonName": "Example Timesheets",
        "am.addonKey": "com.example.timesheets",
        "am.productId": "acd011b1-1111-45bc-902a-247046a11111",
        "am.appEdition": "Standard",
        "am.status": "active",
        "am.licenseType": "COMMERCIAL",
        "am.hosting": "Cloud",
        "am.lastUpdated": "2026-05-03",
        "am.tier": "50 Users",
        "am.tier.number": 50,
        "am.maintenanceStartDate": "2026-04-12",
        "am.maintenanceEndDate": "2026-05-12",
        "am.evaluationStartDate": "2026-03-12",
        "am.evaluationEndDate": "2026-04-10",
        "am.evaluationSaleDate": "2026-04-12",
        "am.appEntitlementId": "ent-c-1",
        "am.appEntitlementNumber": "E-c-1",
        "am.hostEntitlementId": "host-1",
        "am.parentProductName": "Jira",
        "am.parentProductEdition": "Premium",
        "am.parentProductBillingCycle": "MONTHLY",
        "am.installedOnSandbox": False,
        "am.cloudSiteHostname": "c-1.atlassian.net",
        "am.company": "Acme Corp",
        "am.country": "Germany",
        "am.region": "EMEA",
        "am.evaluationOpportunitySize": 50,
        "am.daysToConvertEval": 2,
        "am.convertedFromEvaluation": True,  # converted after 2 days, on 2026-04-12
        "am.attribution.channel": "Paid search",
    }


def test_no_contact_or_partner_field_is_ever_kept():
    record = cloud_license("c-2")
    record["contactDetails"]["billingContact"] = {"email": "bill@acme.example", "phone": "555"}
    values = str(license_traits(record))
    for secret in ("admin@acme.example", "Ana Admin", "bill@acme.example", "555"):
        assert secret not in values


def test_na_empty_and_redacted_values_are_not_written():
    record = cloud_license(
        "c-3",
        parentProductEdition="NA",
        appEdition="",
        evaluationSaleDate=None,
        installedOnSandbox="Yes",
        contactDetails={"company": "RTBF", "country": " ", "region": "NA"},
    )
    traits = license_traits(record)
    for missing in (
        "am.parentProductEdition",
        "am.appEdition",
        "am.evaluationSaleDate",
        "am.company",
        "am.country",
        "am.region",
    ):
        assert missing not in traits
    assert traits["am.installedOnSandbox"] is True


def test_tier_number_is_the_number_in_the_tier_text():
    assert tier_number("50 Users") == 50
    assert tier_number("10,000 Users") == 10000
    assert tier_number("Unlimited Users") is None
    assert tier_number("Evaluation") is None
    assert "am.tier.number" not in license_traits(cloud_license("c-4", tier="Unlimited Users"))


def test_active_license_outranks_a_later_maintenance_end_then_latest_end_wins():
    active = cloud_license("c", status="active", maintenanceEndDate="2026-01-01")
    cancelled = cloud_license(
        "c", status="cancelled", maintenanceEndDate="2027-01-01", appEntitlementId="other"
    )
    later = cloud_license(
        "c", status="active", maintenanceEndDate="2026-06-01", appEntitlementId="later"
    )
    ranks = {
        name: license_map(rec).rank
        for name, rec in [("active", active), ("cancelled", cancelled), ("later", later)]
    }
    assert ranks["active"] > ranks["cancelled"]
    assert ranks["later"] > ranks["active"]


def test_license_ref_prefers_the_entitlement_then_server_ids():
    assert license_ref(cloud_license("c")) == "appEntitlementId:ent-c"
    assert license_ref({"addonLicenseId": "123", "licenseId": "SEN-1"}) == "addonLicenseId:123"


@pytest.mark.parametrize(
    ("fields", "trait", "stored"),
    [
        ({"installedOnSandbox": "true"}, "am.installedOnSandbox", True),
        ({"installedOnSandbox": "FALSE"}, "am.installedOnSandbox", False),
        ({"installedOnSandbox": True}, "am.installedOnSandbox", True),
        ({"evaluationOpportunitySize": "1"}, "am.evaluationOpportunitySize", 1),
        ({"evaluationOpportunitySize": "12.50"}, "am.evaluationOpportunitySize", 12.5),
        ({"daysToConvertEval": 14}, "am.daysToConvertEval", 14),
        ({"lastUpdated": "2026-05-03T10:00:00Z"}, "am.lastUpdated", "2026-05-03"),
        ({"appEntitlementId": 4711}, "am.appEntitlementId", "4711"),
        ({"tier": "  25 Users "}, "am.tier", "25 Users"),
        ({"tier": "1" * 20 + " Users"}, "am.tier.number", None),  # beyond 15 digits: no number
    ],
)
def test_values_are_normalised_by_their_kind(fields, trait, stored):
    assert license_traits(cloud_license("n", **fields)).get(trait) == stored


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"evaluationOpportunitySize": "NaN"}, "evaluationOpportunitySize", "not a number"),
        ({"evaluationOpportunitySize": BadNumber("NaN")}, "evaluationOpportunitySize", "NaN"),
        ({"daysToConvertEval": BadNumber("1e999")}, "daysToConvertEval", "1e999"),
        ({"daysToConvertEval": "1e999"}, "daysToConvertEval", "not a number"),
        ({"daysToConvertEval": "9" * 16}, "daysToConvertEval", "more than 15 digits"),
        ({"daysToConvertEval": 1e300}, "daysToConvertEval", "more than 15 digits"),
        ({"tier": "9" * 5000}, "tier", "longer than 255"),
        ({"contactDetails": {"company": "Acme\x00Corp"}}, "contactDetails.company", "NUL"),
        ({"cloudId": "site\x00"}, "cloudId", "NUL"),
        ({"cloudId": "x" * 256}, "cloudId", "longer than 255"),
        ({"cloudId": 10**300}, "cloudId", "longer than 255"),
        ({"cloudId": 1.5}, "cloudId", "a fraction"),
        ({"addonName": "bad \ud800 text"}, "addonName", "lone surrogate"),
        ({"addonName": "x" * 100_000}, "addonName", "longer than 255"),
        ({"installedOnSandbox": "maybe"}, "installedOnSandbox", "Yes/No"),
        ({"maintenanceEndDate": "2026-02-30"}, "maintenanceEndDate", "not a date"),
        ({"status": ["active"]}, "status", "a list"),
        ({"attribution": "organic"}, "attribution", "an object"),
    ],
)
def test_a_value_breaking_its_rule_rejects_the_license_naming_field_and_reason(
    fields, field, reason
):
    with pytest.raises(LicenseRejected) as caught:
        license_map(cloud_license("r", **fields))
    assert caught.value.field == field and reason in caught.value.reason


def test_the_widest_license_stays_within_ingestions_traits_limit():
    """255 four-byte characters in every text field: still under 32 KiB of traits as JSON."""
    wide = "\U0001f600" * 255
    text_fields = [f for f, (_, kind) in mapping._TOP_LEVEL.items() if kind in ("id", "text")]
    record = cloud_license("w", **dict.fromkeys(text_fields, wide))
    record["contactDetails"] = dict.fromkeys(("company", "country", "region"), wide)
    record["attribution"] = dict.fromkeys(mapping._ATTRIBUTION, wide)
    traits = license_traits(record)
    assert traits["am.company"] == wide and traits["am.attribution.campaignContent"] == wide
    size = len(json.dumps(traits, ensure_ascii=False).encode())
    assert 29 * 1020 < size <= mapping.MAX_TRAITS_BYTES == 32 * 1024


def test_numeric_license_ids_are_their_own_licenses():
    first = cloud_license("site", appEntitlementId=101)
    second = cloud_license("site", appEntitlementId=102)
    assert license_ref(first) == "appEntitlementId:101" != license_ref(second)


def test_a_numeric_cloud_id_is_the_account_id_as_text():
    assert license_map(cloud_license("x", cloudId=123456)).cloud_id == "123456"
    assert license_map(cloud_license("x", cloudId="NA")).cloud_id is None


def test_the_label_names_a_license_safely_whatever_its_ids_hold():
    assert license_label(cloud_license("x", appEntitlementId=7)) == "appEntitlementId 7"
    assert license_label({"licenseId": "SEN-\x001"}) == "licenseId 'SEN-\\x001'"
    assert license_label("oops") == "(not a license object)"
