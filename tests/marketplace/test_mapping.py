"""License record -> am. traits: the documented subset, NA and empty skipped, no contact fields."""

from marketplace.mapping import license_rank, license_ref, license_traits, tier_number
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
        name: license_rank(rec, license_ref(rec))
        for name, rec in [("active", active), ("cancelled", cancelled), ("later", later)]
    }
    assert ranks["active"] > ranks["cancelled"]
    assert ranks["later"] > ranks["active"]


def test_license_ref_prefers_the_entitlement_then_server_ids():
    assert license_ref(cloud_license("c")) == "appEntitlementId:ent-c"
    assert license_ref({"addonLicenseId": "123", "licenseId": "SEN-1"}) == "addonLicenseId:123"
