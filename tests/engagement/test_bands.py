"""One band rule and one hot/cold rule (engagement/bands.py): the built-in segments, the
band_entered trigger, Slack, the dashboard's marks and the CSV all say the same of a score."""

import pytest

from automations.payloads import band_label, band_of
from automations.slack import slack_message
from dashboard.templatetags.score_marks import heat
from engagement.bands import BANDS
from engagement.bands import band_of as band_of_score
from engagement.builtin_segments import BUILTIN_SEGMENTS


def _segment_holds(conditions: list[dict], value: int) -> bool:
    checks = {"greater_than": lambda bound: value > bound, "less_than": lambda bound: value < bound}
    return all(checks[c["operator"]](c["value"]) for c in conditions)


def test_the_bands_cover_every_score_once():
    for score in range(0, 101):
        assert sum(band.holds(score) for band in BANDS) == 1
    assert [band.label for band in BANDS] == ["under 25", "25-49", "50-74", "75 and over"]


@pytest.mark.parametrize("score", [0, 24, 25, 49, 50, 74, 75, 100])
def test_the_builtin_band_segments_and_the_trigger_agree_with_the_rule(score):
    band = band_of_score(score)
    segments = {name: conditions for name, conditions in BUILTIN_SEGMENTS}

    assert _segment_holds(segments[f"Score {band.label}"], score)
    assert [
        name
        for name in segments
        if name.startswith("Score ") and _segment_holds(segments[name], score)
    ] == [f"Score {band.label}"]
    assert band_of(score) == band.floor and band_label(score) == band.label


@pytest.mark.parametrize(
    ("change", "mark", "slack"),
    [
        (3, "", "+3"),
        (9, "", "+9"),
        (10, "hot", ":fire: +10"),
        (-9, "", "-9"),
        (-10, "cold", ":snowflake: -10"),
        (0, "", "no change"),
    ],
)
def test_hot_and_cold_are_one_rule_on_pages_slack_and_segments(change, mark, slack):
    segments = dict(BUILTIN_SEGMENTS)
    message = slack_message(
        event_type="t",
        subject={"name": "Acme", "engagement_score": 50, "score_change": change},
        what="moved",
        dashboard_url="http://x.test/",
    )

    assert heat(change) == mark
    assert message["blocks"][1]["fields"][1]["text"] == f"*Change*\n{slack}"
    assert _segment_holds(segments["Red Hot"], change) == (mark == "hot")
    assert _segment_holds(segments["Ice Cold"], change) == (mark == "cold")
