"""Money on the dashboard (issue 73): the accounts list's MRR and renewal columns and their
sorts, the CSV's two columns, and the overview's MRR in all, by health band and renewing at risk.
Accounts and their `am.` traits are built by hand, dates relative to today, on both databases."""

import csv
import io
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache

from engagement.builtin_segments import RENEWAL_AT_RISK
from engagement.models import Account, AccountScore, Segment
from engagement.segments import segments_refresh
from tests.dashboard.conftest import signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]


def ahead(days: int) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).date().isoformat()


def account(tenant, name: str, score: int, traits: dict) -> Account:
    found = Account.objects.create(
        product=tenant.product, tracking_id=name.lower(), traits={"name": name, **traits}
    )
    AccountScore.objects.create(workspace=tenant.workspace, account=found, engagement_score=score)
    return found


def license_of(mrr, renews_in: int, **traits) -> dict:
    return {
        "am.status": "active",
        "am.licenseType": "COMMERCIAL",
        "am.mrr": mrr,
        "am.maintenanceEndDate": ahead(renews_in),
        **traits,
    }


@pytest.fixture
def paying(acme):
    """Initech pays $3,352.94 a month and renews in 20 days scoring 40 (at risk); Umbrella
    $1,200 in 90 days, scoring 80; Pied Piper's lapsed license is worth $0 (not commercial any
    more); Hooli has no license and no MRR."""
    cache.clear()  # the overview's figures are cached per workspace
    account(acme, "Initech", 40, license_of(3352.94, 20))
    account(acme, "Umbrella", 80, license_of(1200, 90))
    account(acme, "Pied Piper", 10, license_of(0, -3, **{"am.status": "inactive"}))
    account(acme, "Hooli", 60, {})
    segments_refresh(workspace_id=acme.workspace.id)
    return acme


def cells(html: str, column: str) -> list[str]:
    """The text of one column's cells, top to bottom, tags removed."""
    found = re.findall(rf'<td class="[^"]*\b{column}\b[^"]*">(.*?)</td>', html, re.S)
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in found]


def names(html: str) -> list[str]:
    return re.findall(r'<a href="/w/\d+/accounts/\d+/">([^<]+)</a>', html)


def accounts_page(tenant, person, **params) -> str:
    response = signed_in(person).get(f"/w/{tenant.workspace.id}/accounts/", params)
    assert response.status_code == 200
    return response.content.decode()


def test_the_accounts_list_shows_mrr_to_the_cent_and_the_renewal_date(paying, vera):
    html = accounts_page(paying, vera)
    assert names(html) == ["Umbrella", "Hooli", "Initech", "Pied Piper"]  # by score
    assert cells(html, "mrr") == ["$1,200.00", "–", "$3,352.94", "$0.00"]
    assert cells(html, "renewal") == [ahead(90), "–", ahead(20), ahead(-3)]
    assert 'title="No MRR known"' in html


def test_sorting_by_mrr_puts_accounts_without_one_last_either_way(paying, vera):
    html = accounts_page(paying, vera, sort="mrr")
    assert names(html) == ["Initech", "Umbrella", "Pied Piper", "Hooli"]
    assert cells(html, "mrr") == ["$3,352.94", "$1,200.00", "$0.00", "–"]
    ascending = accounts_page(paying, vera, sort="mrr", order="asc")
    assert names(ascending) == ["Pied Piper", "Umbrella", "Initech", "Hooli"]


def test_sorting_by_renewal_date_starts_with_the_soonest(paying, vera):
    html = accounts_page(paying, vera)
    # The column headers' first click: the highest MRR first, the soonest renewal first.
    assert "?sort=mrr&amp;order=desc" in html
    assert "?sort=renewal&amp;order=asc" in html
    soonest = accounts_page(paying, vera, sort="renewal", order="asc")
    assert names(soonest) == ["Pied Piper", "Initech", "Umbrella", "Hooli"]
    latest = accounts_page(paying, vera, sort="renewal", order="desc")
    assert names(latest) == ["Umbrella", "Initech", "Pied Piper", "Hooli"]


def test_a_mrr_that_is_not_a_number_is_no_mrr(acme, vera):
    account(acme, "Texty", 50, {"am.mrr": "12.50"})
    account(acme, "Booly", 40, {"am.mrr": True})
    account(acme, "Whole", 30, {"am.mrr": 7})
    html = accounts_page(acme, vera, sort="mrr")
    assert names(html) == ["Whole", "Booly", "Texty"]  # the two without an MRR by id, last
    assert cells(html, "mrr") == ["$7.00", "–", "–"]


def test_the_csv_carries_mrr_in_dollars_and_the_renewal_date(paying, vera):
    response = signed_in(vera).get(f"/w/{paying.workspace.id}/accounts.csv", {"sort": "mrr"})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["name"], r["mrr_usd"], r["renewal_date"]) for r in rows] == [
        ("Initech", "3352.94", ahead(20)),
        ("Umbrella", "1200.00", ahead(90)),
        ("Pied Piper", "0.00", ahead(-3)),
        ("Hooli", "", ""),
    ]


def overview(tenant, person) -> str:
    response = signed_in(person).get(f"/w/{tenant.workspace.id}/")
    assert response.status_code == 200
    return response.content.decode()


def band_rows(html: str) -> list[tuple[str, str, str]]:
    table = re.search(r'<table class="compact" id="mrr-by-band">(.*?)</table>', html, re.S)
    assert table, "no MRR by band table"
    rows = re.findall(
        r"<tr><td>(.*?)</td><td class=\"num\">(\d+)</td><td class=\"num\">(.*?)</td>",
        table.group(1),
    )
    return [(band, count, re.sub(r"<[^>]+>", "", money)) for band, count, money in rows]


def tile(html: str, tile_id: str) -> str:
    found = re.search(rf'<li id="{tile_id}">(.*?)</li>', html, re.S)
    assert found, tile_id
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())


def test_the_overview_shows_mrr_in_all_by_band_and_renewing_at_risk(paying, vera):
    html = overview(paying, vera)
    # $3,352.94 + $1,200 + $0, to the whole dollar.
    assert tile(html, "mrr-total") == "$4,553 MRR (USD) of 3 accounts"
    # Initech: active, commercial, renewing in 20 days, scoring 40.
    assert tile(html, "mrr-at-risk") == (
        "$3,353 MRR renewing at risk in the next 60 days: 1 account"
    )
    segment = Segment.objects.get(workspace=paying.workspace, name=RENEWAL_AT_RISK)
    assert f"?segment={segment.id}&amp;sort=mrr" in html
    # Highest band first, to the cent so that the rows add up to the total shown above them;
    # Hooli (50-74) has no MRR: "–", not $0.
    assert band_rows(html) == [
        ("75 and over", "1", "$1,200.00"),
        ("50-74", "0", "–"),
        ("25-49", "1", "$3,352.94"),
        ("under 25", "1", "$0.00"),
    ]
    # The link lists the segment's members.
    members = accounts_page(paying, vera, segment=segment.id, sort="mrr")
    assert names(members) == ["Initech"]


def test_no_account_at_risk_is_nothing_at_risk_and_unknown_mrr_is_not_zero(acme, vera):
    cache.clear()
    account(acme, "Umbrella", 80, license_of(1200, 10))  # renewing soon, but healthy
    html = overview(acme, vera)
    assert tile(html, "mrr-at-risk") == "$0 MRR renewing at risk in the next 60 days"
    cache.clear()
    account(acme, "Initech", 20, license_of(None, 10))  # at risk, its MRR not known
    segments_refresh(workspace_id=acme.workspace.id)
    html = overview(acme, vera)
    assert tile(html, "mrr-at-risk") == "– MRR renewing at risk in the next 60 days: 1 account"


def test_the_mrr_at_risk_is_the_segments_members_or_the_built_in_rule_without_it(paying, vera):
    segment = Segment.objects.get(workspace=paying.workspace, name=RENEWAL_AT_RISK)
    # Edited: a longer horizon takes Umbrella (renewing in 90 days) in at the next refresh.
    segment.conditions = [
        {"field": "trait:am.maintenanceEndDate", "operator": "within_next_days", "value": 120}
    ]
    segment.save()
    segments_refresh(workspace_id=paying.workspace.id)
    cache.clear()
    assert tile(overview(paying, vera), "mrr-at-risk") == (
        "$4,553 MRR of the accounts in Renewal at risk (its conditions edited here): 2 accounts"
    )
    # Deleted: the built-in conditions, and no link.
    segment.delete()
    cache.clear()
    html = overview(paying, vera)
    assert tile(html, "mrr-at-risk") == "$3,353 MRR renewing at risk in the next 60 days: 1 account"
    assert "?segment=" not in html


def test_a_workspace_without_mrr_says_so_instead_of_showing_zero(acme, vera):
    cache.clear()
    account(acme, "Hooli", 60, {"plan": "free"})
    html = overview(acme, vera)
    assert "No account has a monthly recurring revenue yet" in html
    assert "$0" not in html
    assert 'id="mrr-by-band"' not in html
