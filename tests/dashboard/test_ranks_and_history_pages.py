"""The account and user pages (issue 71 §2-3): a subject scoring 0 has no percentile ("–"), and
the daily-score chart draws nothing before the subject was first seen ("–" in its table), where
"score yesterday" reads the same as the chart."""

import json
import re

import pytest

from engagement.history import score_history_update
from engagement.models import Account, User
from engagement.scoring import workspace_rescore
from tests.dashboard.conftest import signed_in
from tests.engagement.helpers import apply, group, track

pytestmark = pytest.mark.both_databases


def url(workspace, path=""):
    return f"/w/{workspace.id}/{path}"


def percentile_shown(response) -> str:
    content = response.content.decode()
    start = content.index('id="percentile-rank">') + len('id="percentile-rank">')
    return content[start : content.index("</span>", start)]


def test_an_account_scoring_0_has_no_percentile(acme, vera, scored):
    client = signed_in(vera)
    # Initech and Umbrella are active, ranked between them; Hooli's user never sent an event.
    initech = client.get(url(acme.workspace, f"accounts/{scored.initech.id}/"))
    hooli = client.get(url(acme.workspace, f"accounts/{scored.hooli.id}/"))
    assert (percentile_shown(initech), percentile_shown(hooli)) == ("100", "–")
    cy = User.objects.get(product=acme.product, tracking_id="cy")
    assert percentile_shown(client.get(url(acme.workspace, f"users/{cy.id}/"))) == "–"


def test_the_chart_starts_on_the_day_the_account_was_first_seen(acme, vera, scored):
    # Dunder and its user Dee are first seen two days ago.
    apply(
        acme,
        group("dee", "dunder", {"name": "Dunder"}, days_ago=2),
        track("dee", "Login", days_ago=2, account="dunder"),
    )
    workspace_rescore(workspace_id=acme.workspace.id)
    score_history_update(workspace_id=acme.workspace.id)
    dunder = Account.objects.get(product=acme.product, tracking_id="dunder")
    response = signed_in(vera).get(url(acme.workspace, f"accounts/{dunder.id}/"))

    chart = response.context["history_chart"]
    assert chart.y[:27] == [None] * 27  # not drawn: no invented 0 before it was seen
    assert all(score > 0 for score in chart.y[27:])
    assert response.context["period"].score_yesterday == chart.y[-2]
    script = re.search(r'id="score-chart-data"[^>]*>([^<]*)<', response.content.decode())
    drawn = json.loads(script.group(1))
    assert drawn["series"][0]["y"][:27] == [None] * 27  # plotly.js leaves null days undrawn
    assert response.content.count(b'<td class="num">\xe2\x80\x93</td>') == 27
