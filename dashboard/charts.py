"""What a page hands _chart.html: the numbers plotly.js draws, the table that repeats them, the
axis span the title names, and the sentence shown instead of a chart with nothing to draw."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

# plotly.js reads dates without a time zone; every date here is UTC.
_PLOTLY_TIME = "%Y-%m-%d %H:%M"
DAY_MS = 86_400_000
MINUTE_MS = 60_000


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    chart_type: str  # "line" or "bar"
    x: list
    y: list
    y_title: str
    x_title: str = "Day"
    # A score's ceiling (the axis shows 0 to y_max, with room for a point at y_max); None: counts,
    # on whole-number ticks.
    y_max: int | None = None
    # Further series over the same x, each (title, values): drawn side by side with a legend.
    more: tuple[tuple[str, list], ...] = ()
    axis_title: str = ""  # the y axis's, when it is not the one series' title
    # The x axis's span, whatever the data covers (dates, as plotly.js reads them); a bar's width
    # in milliseconds on such an axis.
    x_span: tuple[str, str] | None = None
    bar_ms: int | None = None
    # Shown instead of the chart when every value is 0 (or there is none).
    empty_text: str = "Nothing to show yet."

    @property
    def data_id(self) -> str:
        return f"{self.id}-data"

    @property
    def data(self) -> dict:
        return {
            "x": self.x,
            "series": [{"name": name, "y": y} for name, y in self.series],
        }

    @property
    def series(self) -> list[tuple[str, list]]:
        return [(self.y_title, self.y), *self.more]

    @property
    def is_empty(self) -> bool:
        return not any(value for _, values in self.series for value in values)

    @property
    def y_axis_title(self) -> str:
        return self.axis_title or self.y_title

    @property
    def y_titles(self) -> list[str]:
        return [name for name, _ in self.series]

    @property
    def rows(self) -> list[tuple]:
        return list(zip(self.x, *(y for _, y in self.series), strict=True))


def plotly_time(moment: datetime) -> str:
    return moment.strftime(_PLOTLY_TIME)


def day_span(days: list[date]) -> tuple[str, str] | None:
    """From half a day before the first day to half a day after the last: every day's bar or
    point whole, the axis the days of the title whatever has data."""
    if not days:
        return None
    half = timedelta(hours=12)
    return (
        plotly_time(datetime.combine(days[0], time()) - half),
        plotly_time(datetime.combine(days[-1], time()) + half),
    )


def day_chart(chart_id: str, title: str, days: list, y_title: str, *, empty_text: str) -> Chart:
    """Counts per day (objects with `day` and `count`), over exactly these days."""
    return Chart(
        id=chart_id,
        title=title,
        chart_type="bar",
        x=[d.day.isoformat() for d in days],
        y=[d.count for d in days],
        y_title=y_title,
        x_span=day_span([d.day for d in days]),
        bar_ms=int(DAY_MS * 0.8),
        empty_text=empty_text,
    )


def score_chart(points: list, days: int) -> Chart:
    """Daily scores (engagement/history ScorePoint); a day before the subject was first seen has
    no score (None): plotly.js draws nothing there, and the table shows "–"."""
    return Chart(
        id="score-chart",
        title=f"Daily score, last {days} days",
        chart_type="line",
        x=[point.date.isoformat() for point in points],
        y=[point.engagement_score for point in points],
        y_title="Score",
        y_max=100,
        x_span=day_span([point.date for point in points]),
        empty_text=f"No score in the last {days} days: no counted event.",
    )


def minute_chart(
    chart_id: str, title: str, minutes: list, *, since: datetime, until: datetime, empty_text: str
) -> Chart:
    """Requests per minute (objects with `minute` and `requests`), on an axis from `since` to
    `until` whichever minutes have requests."""
    return Chart(
        id=chart_id,
        title=title,
        chart_type="bar",
        x=[plotly_time(m.minute) for m in minutes],
        y=[m.requests for m in minutes],
        x_title="Minute (UTC)",
        y_title="Requests",
        x_span=(plotly_time(since), plotly_time(until)),
        bar_ms=MINUTE_MS,
        empty_text=empty_text,
    )


def bands_chart(bands: list[tuple[str, int]]) -> Chart:
    """Accounts per health band, (label, count) from the lowest band up."""
    return Chart(
        id="bands-chart",
        title="Accounts by health band",
        chart_type="bar",
        x=[label for label, _ in bands],
        y=[count for _, count in bands],
        x_title="Score",
        y_title="Accounts",
        empty_text="No accounts yet.",
    )


def segment_changes_chart(changes: list, *, target: str, days: int) -> Chart:
    """A segment's joins and leaves per day (`changes`: rows with day, joined and left)."""
    return Chart(
        id="changes-chart",
        title=f"Joins and leaves per day, last {days} days",
        chart_type="bar",
        x=[c.day.isoformat() for c in changes],
        y=[c.joined for c in changes],
        y_title="Joined",
        more=(("Left", [c.left for c in changes]),),
        axis_title=target,
        x_span=day_span([c.day for c in changes]),
        bar_ms=int(DAY_MS * 0.8),
        empty_text=f"No joins or leaves in the last {days} days.",
    )
