"""`{% load automation_display %}`: automations.display's words in templates."""

from django import template

from automations.display import cooldown_shown
from engagement.presentation import condition_text

register = template.Library()


@register.filter
def cooldown(seconds: int) -> str:
    """{{ automation.cooldown_seconds|cooldown }}: "24 hours", "30 minutes"."""
    return cooldown_shown(seconds)


@register.filter
def condition_words(condition: dict) -> str:
    """{{ condition|condition_words }}: "plan equals pro" (engagement.presentation)."""
    return condition_text(condition) if isinstance(condition, dict) else str(condition)
