"""The dashboard's pages through the Django test client: sign-in, scoping, the account list's
search, filters, sorting, export, and each page's content and empty states."""

import csv
import io

import pytest
from django.core.cache import cache
from django.test import Client

from engagement.builtin_segments import BUILTIN_SEGMENTS
from engagement.models import AccountScore, Segment
from engagement.scoring import workspace_refresh
from engagement.segments import segment_refresh, segments_refresh
from tests.dashboard.conftest import PASSWORD, signed_in
from tests.engagement.helpers import apply, group, track


def url(workspace, path=""):
    return f"/w/{workspace.id}/{path}"


def account_names(response) -> list[str]:
    return [row.name or row.tracking_id for row in response.context["page"].rows]


# --- Sign-in and scoping ----------------------------------------------------------------------


def test_an_anonymous_visitor_is_sent_to_sign_in(acme):
    client = Client()
    for path in ["/", url(acme.workspace), url(acme.workspace, "accounts/")]:
        response = client.get(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/?next=")


def test_signing_in_with_the_admin_account_opens_the_only_workspace(acme, vera):
    client = Client()
    page = client.get("/login/")
    assert page.status_code == 200
    assert b'<label for="id_username">' in page.content
    response = client.post("/login/", {"username": "vera", "password": PASSWORD}, follow=True)
    assert response.redirect_chain[-1][0] == url(acme.workspace)
    assert b"Acme" in response.content


def test_a_wrong_password_is_refused_on_the_page(vera):
    response = Client().post("/login/", {"username": "vera", "password": "nope"})
    assert response.status_code == 200
    assert b'role="alert"' in response.content


def test_a_member_sees_only_their_products(acme, globex, vera, scored):
    client = signed_in(vera)
    assert client.get(url(acme.workspace)).status_code == 200
    assert client.get(url(globex.workspace)).status_code == 404
    assert client.get(url(globex.workspace, "accounts/")).status_code == 404
    assert client.get(url(globex.workspace, "health/")).status_code == 404


def test_another_products_records_answer_404_inside_ones_own_workspace(acme, globex, gus, scored):
    # Gus may read Globex; Acme's account, user and segment ids asked through Globex's workspace.
    client = signed_in(gus)
    for path in [
        f"accounts/{scored.initech.id}/",
        f"users/{scored.ann.id}/",
        f"segments/{scored.enterprise.id}/",
        f"accounts/?segment={scored.enterprise.id}",
    ]:
        assert client.get(url(globex.workspace, path)).status_code == 404, path


def test_a_person_without_membership_sees_an_empty_picker(acme, django_user_model):
    person = django_user_model.objects.create_user("nobody", "n@example.com", PASSWORD)
    response = signed_in(person).get("/")
    assert response.status_code == 200
    assert b"not a member of any product" in response.content


def test_a_superuser_picks_among_every_workspace(acme, globex, admin_user):
    client = signed_in(admin_user)
    response = client.get("/")
    assert [w.product.name for w in response.context["workspaces"]] == ["Acme", "Globex"]
    chosen = client.get(f"/?workspace={globex.workspace.id}")
    assert chosen["Location"] == url(globex.workspace)


def test_signing_out_ends_the_session(acme, vera):
    client = signed_in(vera)
    assert client.post("/logout/").status_code == 302
    assert client.get(url(acme.workspace)).status_code == 302


# --- Overview ---------------------------------------------------------------------------------


def test_overview_counts_bands_events_and_movers(acme, vera, scored):
    response = signed_in(vera).get(url(acme.workspace))
    summary = response.context["summary"]
    assert (summary.accounts, summary.users) == (3, 3)
    assert (summary.active_accounts, summary.active_users) == (2, 2)
    assert sum(count for _, count in summary.bands) == 3
    assert dict(summary.top_events) == {"Report_Created": 12, "Dashboard_Viewed": 6}
    assert sum(day.count for day in summary.events_per_day) == 18
    assert len(summary.events_per_day) == acme.workspace.lookback_days
    # Every score went up from nothing in the previous period.
    assert [m.tracking_id for m in summary.movers_up][:1] == ["initech"]
    assert b"bands-chart" in response.content and b"events-chart-data" in response.content


def test_overview_shows_the_figures_an_incremental_refresh_keeps(acme, vera, scored):
    # Hooli's idle user turns active; a new user and account are not scored yet.
    apply(acme, track("cy", "Dashboard_Viewed", times=2, account="hooli"))
    assert workspace_refresh(workspace_id=acme.workspace.id).mode == "incremental"
    apply(acme, group("dan", "globo", {"name": "Globo"}))
    cache.clear()

    summary = signed_in(vera).get(url(acme.workspace)).context["summary"]

    scores = AccountScore.objects.filter(workspace=acme.workspace)
    assert (summary.accounts, summary.users) == (4, 4)
    assert (summary.active_accounts, summary.active_users) == (3, 3)
    # The four bands of the built-in segments (engagement/bands.py), lowest first.
    assert summary.bands == [
        ("under 25", scores.filter(engagement_score__lte=24).count() + 1),  # Globo, not scored
        ("25-49", scores.filter(engagement_score__gte=25, engagement_score__lte=49).count()),
        ("50-74", scores.filter(engagement_score__gte=50, engagement_score__lte=74).count()),
        ("75 and over", scores.filter(engagement_score__gte=75).count()),
    ]


def test_overview_of_an_empty_workspace_says_so(acme, vera):
    response = signed_in(vera).get(url(acme.workspace))
    assert response.status_code == 200
    assert b"No events in the window yet." in response.content


# --- Accounts ---------------------------------------------------------------------------------


def test_accounts_are_ranked_by_score_with_change_and_users(acme, vera, scored):
    response = signed_in(vera).get(url(acme.workspace, "accounts/"))
    rows = response.context["page"].rows
    assert [r.tracking_id for r in rows] == ["initech", "umbrella", "hooli"]
    top = rows[0]
    assert top.score == 100 and top.change == 100 and top.heating
    assert (top.active_users, top.total_users) == (1, 1)
    assert rows[2].score == 0 and rows[2].last_seen is None
    assert b"heating up" in response.content  # the flame for +10 and more
    assert b"COMMERCIAL" in response.content  # a chosen trait column (am.licenseType)


@pytest.mark.parametrize(
    ("term", "found"),
    [("initech", ["Initech"]), ("UMBRELLA.EX", ["Umbrella Corp"]), ("hoo", ["Hooli"])],
)
def test_search_by_name_domain_or_tracking_id(acme, vera, scored, term, found):
    response = signed_in(vera).get(url(acme.workspace, "accounts/"), {"q": term})
    assert account_names(response) == found


def test_a_search_that_finds_nothing_says_so(acme, vera, scored):
    response = signed_in(vera).get(url(acme.workspace, "accounts/"), {"q": "zzz"})
    assert response.context["page"].total == 0
    assert b"No account matches" in response.content


def test_filter_by_health_band_and_segment(acme, vera, scored):
    client = signed_in(vera)
    low = client.get(url(acme.workspace, "accounts/"), {"band": "under-25"})
    assert "Hooli" in account_names(low)
    assert "Initech" not in account_names(low)
    high = client.get(url(acme.workspace, "accounts/"), {"band": "75-and-over"})
    assert account_names(high) == ["Initech"]
    members = client.get(url(acme.workspace, "accounts/"), {"segment": scored.enterprise.id})
    assert account_names(members) == ["Initech"]
    both = {"segment": scored.enterprise.id, "band": "under-25"}
    assert account_names(client.get(url(acme.workspace, "accounts/"), both)) == []
    by_name = {"segment": scored.enterprise.id, "sort": "name"}
    assert account_names(client.get(url(acme.workspace, "accounts/"), by_name)) == ["Initech"]


def test_a_user_segment_is_not_an_account_filter(acme, vera, scored):
    users = Segment.objects.create(workspace=acme.workspace, name="Everyone", target="users")
    response = signed_in(vera).get(url(acme.workspace, "accounts/"), {"segment": users.id})
    assert response.status_code == 404


def test_sorting_by_name_and_change_both_ways(acme, vera, scored):
    client = signed_in(vera)
    by_name = client.get(url(acme.workspace, "accounts/"), {"sort": "name", "order": "asc"})
    assert account_names(by_name) == ["Hooli", "Initech", "Umbrella Corp"]
    by_change = client.get(url(acme.workspace, "accounts/"), {"sort": "change", "order": "asc"})
    assert account_names(by_change)[0] == "Hooli"
    bad = client.get(url(acme.workspace, "accounts/"), {"sort": "password", "page": "x"})
    assert bad.status_code == 200
    assert account_names(bad) == ["Initech", "Umbrella Corp", "Hooli"]


def test_pages_of_the_ranking(acme, vera, scored, monkeypatch):
    monkeypatch.setattr("dashboard.views.PER_PAGE", 2)
    client = signed_in(vera)
    first = client.get(url(acme.workspace, "accounts/"))
    second = client.get(url(acme.workspace, "accounts/"), {"page": 2})
    assert account_names(first) == ["Initech", "Umbrella Corp"]
    assert account_names(second) == ["Hooli"]
    assert first.context["page"].pages == 2
    assert b'rel="next"' in first.content
    beyond = client.get(url(acme.workspace, "accounts/"), {"page": 9})
    assert account_names(beyond) == []


def test_csv_export_of_the_current_view(acme, vera, scored):
    response = signed_in(vera).get(url(acme.workspace, "accounts.csv"), {"band": "75-and-over"})
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["tracking_id"], r["name"], r["score"]) for r in rows] == [
        ("initech", "Initech", "100")
    ]
    assert rows[0]["am.licenseType"] == "COMMERCIAL"
    # The band and the hot/cold mark by the one rule the pages use (engagement/bands.py).
    assert (rows[0]["band"], rows[0]["heat"]) == ("75 and over", "hot")


def test_csv_keeps_a_formula_like_trait_as_text(acme, vera):
    from tests.engagement.helpers import apply, group

    apply(acme, group("eve", "evil", {"name": '=HYPERLINK("x")'}))
    response = signed_in(vera).get(url(acme.workspace, "accounts.csv"), {"q": "evil"})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0]["name"] == '\'=HYPERLINK("x")'


def test_no_accounts_yet(acme, vera):
    response = signed_in(vera).get(url(acme.workspace, "accounts/"))
    assert b"No accounts yet" in response.content


# --- Account, user, segment pages -------------------------------------------------------------


def test_account_page_shows_why_it_scores_what_it_does(acme, vera, scored):
    response = signed_in(vera).get(url(acme.workspace, f"accounts/{scored.initech.id}/"))
    assert response.status_code == 200
    ctx = response.context
    assert ctx["score"].engagement_score == 100
    assert {item["event"]: item["points"] for item in ctx["breakdown"]} == {
        "Report_Created": 12,
        "Dashboard_Viewed": 5,
    }
    assert [u.tracking_id for u in ctx["users"]] == ["ann"]
    assert ctx["users"][0].label == "Ann Lee"
    names = [m.segment.name for m in ctx["segments"]]
    assert [m.segment.name for m in ctx["segments"] if not m.segment.builtin] == ["Enterprise"]
    assert "Score 75 and over" in names and "Score under 25" not in names
    assert dict(ctx["license_traits"]) == {"am.licenseType": "COMMERCIAL", "am.status": "active"}
    assert "am.status" not in dict(ctx["own_traits"])
    history = ctx["history_chart"]
    assert len(history.x) == 30 and history.y[-1] == 100
    assert sum(ctx["activity_chart"].y) == 17
    assert b"score-chart-data" in response.content
    assert b"Marketplace license" in response.content


def test_account_chart_spans(acme, vera, scored):
    client = signed_in(vera)
    page = client.get(url(acme.workspace, f"accounts/{scored.initech.id}/"), {"days": 90})
    assert len(page.context["history_chart"].x) == 90
    odd = client.get(url(acme.workspace, f"accounts/{scored.initech.id}/"), {"days": 7000})
    assert len(odd.context["history_chart"].x) == 30


def test_an_unscored_account_page_has_empty_states(acme, vera, scored):
    from tests.engagement.helpers import apply, group

    apply(acme, group("zed", "newco"))
    newco = acme.product.accounts.get(tracking_id="newco")
    response = signed_in(vera).get(url(acme.workspace, f"accounts/{newco.id}/"))
    assert response.status_code == 200
    assert b"No scored events in the window." in response.content
    assert b"In no segment of this workspace." in response.content


def test_user_page(acme, vera, scored):
    response = signed_in(vera).get(url(acme.workspace, f"users/{scored.ann.id}/"))
    assert response.status_code == 200
    assert response.context["score"].engagement_score == 100
    assert [a.tracking_id for a in response.context["accounts"]] == ["initech"]
    assert sum(response.context["activity_chart"].y) == 17


def test_segments_list_and_page(acme, vera, scored):
    client = signed_in(vera)
    listing = client.get(url(acme.workspace, "segments/"))
    listed = [(s.name, s.builtin) for s in listing.context["segments"]]
    builtins = len(BUILTIN_SEGMENTS)
    assert listed[:builtins] == [
        (name, True) for name in sorted(name for name, _ in listed[:builtins])
    ]
    assert [(s.name, s.member_count) for s in listing.context["segments"][builtins:]] == [
        ("Enterprise", 1)
    ]
    page = client.get(url(acme.workspace, f"segments/{scored.enterprise.id}/"))
    members = [(m.id, m.label) for m in page.context["members"].items]
    assert members == [(scored.initech.id, "Initech")]
    chart = page.context["changes_chart"]
    assert (sum(chart.y), sum(dict(chart.more)["Left"])) == (1, 0)


def test_a_segment_page_shows_joins_and_leaves_per_day(acme, globex, vera, gus, scored):
    apply(acme, group("ann", "initech", {"plan": "free"}, days_ago=0))
    assert segment_refresh(segment=scored.enterprise) == (0, 1)
    response = signed_in(vera).get(url(acme.workspace, f"segments/{scored.enterprise.id}/"))
    assert response.status_code == 200
    assert response.context["members"].total == 0
    chart = response.context["changes_chart"]
    today = chart.rows[-1]
    assert today[1:] == (1, 1)  # initech joined and left today
    assert b"changes-chart-data" in response.content
    # The table under the chart repeats it: a Left column, today's row with one join and leave.
    assert b'<th scope="col" class="num">Left</th>' in response.content
    assert (
        f'<td>{today[0]}</td><td class="num">1</td><td class="num">1</td>'.encode()
        in response.content
    )
    # Another product's member cannot open it through their own workspace.
    path = url(globex.workspace, f"segments/{scored.enterprise.id}/")
    assert signed_in(gus).get(path).status_code == 404


def test_no_segments_yet(acme, vera):
    acme.workspace.segments.all().delete()  # the built-in ones too
    response = signed_in(vera).get(url(acme.workspace, "segments/"))
    assert b"No segments yet" in response.content


def test_a_cooling_account_gets_the_snowflake(acme, vera):
    from engagement.scoring import workspace_rescore
    from tests.engagement.helpers import apply, group

    apply(
        acme,
        group("dan", "fading", {"name": "Fading Inc"}),
        group("eli", "steady", {"name": "Steady"}),
        track("dan", "Report_Created", days_ago=35, times=9, account="fading"),
        track("eli", "Report_Created", days_ago=1, times=9, account="steady"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)

    response = signed_in(vera).get(url(acme.workspace, "accounts/"), {"sort": "change"})
    fading = next(r for r in response.context["page"].rows if r.tracking_id == "fading")
    assert fading.change <= -10 and fading.cooling
    assert b"cooling down" in response.content
    summary = signed_in(vera).get(url(acme.workspace)).context["summary"]
    assert [m.tracking_id for m in summary.movers_down] == ["fading"]


def test_the_admins_view_site_link_leads_to_the_dashboard(admin_client):
    page = admin_client.get("/admin/")
    assert b'<a href="/">View site</a>' in page.content


def test_a_search_counts_every_match_on_every_page(acme, vera, scored, monkeypatch):
    monkeypatch.setattr("dashboard.views.PER_PAGE", 2)
    client = signed_in(vera)
    pages = [
        client.get(url(acme.workspace, "accounts/"), {"q": ".example", "page": n}).context["page"]
        for n in (1, 2, 5)
    ]
    assert [p.total for p in pages] == [3, 3, 3]
    assert [len(p.rows) for p in pages] == [2, 1, 0]


def test_a_broken_segment_shows_why_on_its_page_and_in_the_list(acme, vera, scored):
    """Conditions stored past the checks that cannot be evaluated: the refresh keeps the
    segment's members and marks it broken; its page and the list say so, with the reason."""
    Segment.objects.filter(id=scored.enterprise.id).update(
        conditions=[{"field": "event:Login", "operator": "count_at_least", "value": 10**30}]
    )
    segments_refresh(workspace_id=acme.workspace.id)
    reason = Segment.objects.get(id=scored.enterprise.id).broken_reason
    assert reason.startswith("conditions[0]")
    client = signed_in(vera)

    page = client.get(url(acme.workspace, f"segments/{scored.enterprise.id}/"))
    assert page.status_code == 200
    assert f"<strong>Broken:</strong> {reason}" in page.content.decode()
    members = [(m.id, m.label) for m in page.context["members"].items]
    assert members == [(scored.initech.id, "Initech")]
    listing = client.get(url(acme.workspace, "segments/")).content.decode()
    assert f"Broken: {reason}" in listing
    assert listing.count("Broken:") == 1
