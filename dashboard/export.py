"""The account list as a CSV file: every row the list's search, filters and order select."""

from __future__ import annotations

import csv

from django.http import HttpRequest, StreamingHttpResponse
from django.utils import timezone

from dashboard import selectors as page_selectors
from dashboard.money import csv_amount
from dashboard.views import TRAIT_COLUMNS, AccountListView
from engagement.bands import heat
from engagement.presentation import trait_text


class _Echo:
    def write(self, value: str) -> str:
        return value


class AccountExportView(AccountListView):
    """The account list as it is filtered and sorted, every page, as CSV."""

    def get(self, request: HttpRequest) -> StreamingHttpResponse:
        _, _, query = self.query()
        writer = csv.writer(_Echo())
        header = [
            "id",
            "tracking_id",
            "name",
            "domain",
            "score",
            "change",
            "band",
            "heat",
            "active_users",
            "total_users",
            "last_seen",
            "mrr_usd",
            "renewal_date",
            *TRAIT_COLUMNS,
        ]

        def lines():
            yield writer.writerow(header)
            for row in page_selectors.account_list_all(workspace=self.workspace, query=query):
                traits = [_cell(row.trait(name)) for name in TRAIT_COLUMNS]
                yield writer.writerow(
                    [
                        row.id,
                        _cell(row.tracking_id),
                        _cell(row.name),
                        _cell(row.domain),
                        row.score,
                        row.change,
                        row.band.label,
                        heat(row.change),
                        row.active_users,
                        row.total_users,
                        row.last_seen.isoformat() if row.last_seen else "",
                        csv_amount(row.mrr),
                        row.renewal.isoformat() if row.renewal else "",
                        *traits,
                    ]
                )

        response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
        name = f"accounts-{self.workspace.id}-{timezone.now():%Y%m%d-%H%M}.csv"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response


def _cell(value: object) -> str:
    text = trait_text(value)
    # A cell a spreadsheet would run as a formula is kept as text.
    return "'" + text if text[:1] in ("=", "+", "-", "@") and not _is_number(text) else text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
