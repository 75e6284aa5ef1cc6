"""The accounts and users lists' query string: search, segment, health band, order, page."""

from typing import cast

from django import forms

from dashboard.selectors import ACCOUNT_SORTS, USER_SORTS, ListQuery
from engagement.bands import BANDS
from engagement.input_rules import MAX_WHOLE

PER_PAGE = 25
DEFAULTS = {"q": "", "segment": None, "band": "", "sort": "score", "order": "desc", "page": 1}


class ListForm(forms.Form):
    """The query string of a list; a subclass names the list's sorts (`sorts`)."""

    sorts: tuple[str, ...] = ()

    q = forms.CharField(required=False, max_length=200, label="Search")
    segment = forms.IntegerField(required=False, min_value=1, label="Segment")
    band = forms.ChoiceField(
        required=False,
        label="Health",
        choices=[("", "Any score")] + [(band.key, band.label) for band in BANDS],
    )
    sort = forms.ChoiceField(required=False, choices=[], label="Sort by")
    order = forms.ChoiceField(
        required=False, choices=[("desc", "descending"), ("asc", "ascending")], label="Order"
    )
    # At most 2**31 - 1: a larger page would overflow the database's OFFSET (a bad value: page 1).
    page = forms.IntegerField(required=False, min_value=1, max_value=MAX_WHOLE)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["sort"]).choices = [(name, name) for name in self.sorts]

    def values(self) -> dict:
        """The valid parameters, the defaults for the rest (a bad value is not an error page)."""
        self.is_valid()
        found = {**DEFAULTS}
        for name, value in self.cleaned_data.items():
            if value not in (None, ""):
                found[name] = value
        return found

    def query(self) -> ListQuery:
        values = self.values()
        return ListQuery(
            search=values["q"],
            segment_id=values["segment"],
            band=values["band"],
            sort=values["sort"],
            ascending=values["order"] == "asc",
        )


class AccountListForm(ListForm):
    sorts = ACCOUNT_SORTS


class UserListForm(ListForm):
    sorts = USER_SORTS
