"""Template filters for the score marks pages show, from engagement's one rule for each."""

from django import template

from engagement import bands

register = template.Library()


@register.filter
def heat(change: int | None) -> str:
    """ "hot", "cold" or "" (engagement.bands: from +10, from -10)."""
    return bands.heat(change)
