"""Template filters for amounts of money (dashboard/money.py): `{{ amount|money }}` to the cent,
`{{ amount|money_whole }}` to the whole dollar; "–" for no amount."""

from django import template

from dashboard.money import money_text

register = template.Library()


@register.filter
def money(amount) -> str:
    return money_text(amount)


@register.filter
def money_whole(amount) -> str:
    return money_text(amount, cents=False)
