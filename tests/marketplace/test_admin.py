"""The marketplace connection's admin pages: the app named as a person names it, and the recent
runs as a compact table linking to each run's page (none on the add page)."""

import re

from django.urls import reverse

from marketplace.models import SyncRun
from tests.marketplace.conftest import PRODUCT_ID, connect


def test_the_add_page_has_no_run_table(acme, admin_client):
    page = admin_client.get(reverse("admin:marketplace_marketplaceconnection_add"))

    assert page.status_code == 200
    assert page.context["inline_admin_formsets"] == []
    assert "sync runs" not in page.content.decode().lower()


def test_the_change_page_names_the_app_and_lists_runs_in_a_few_columns(acme, admin_client):
    connection = connect(acme)
    run = SyncRun.objects.get(connection=connection)
    page = admin_client.get(
        reverse("admin:marketplace_marketplaceconnection_change", args=[connection.id])
    )

    assert page.status_code == 200
    html = page.content.decode()
    assert page.context["adminform"].form["app"].value() == "Example Timesheets"
    assert 'name="app" value="Example Timesheets"' in html
    assert f'name="app" value="{PRODUCT_ID}"' not in html
    (runs,) = page.context["inline_admin_formsets"]
    headers = [field["label"] for field in runs.fields()]
    assert headers == ["started at", "trigger", "mode", "outcome", "licenses", "error"]
    assert "0 seen, 0 matched, 0 created, 0 skipped" in html
    assert reverse("admin:marketplace_syncrun_change", args=[run.id]) in html


def test_the_run_list_has_a_few_columns(acme, admin_client):
    connect(acme)
    page = admin_client.get(reverse("admin:marketplace_syncrun_changelist"))

    assert page.status_code == 200
    html = page.content.decode()
    columns = re.findall(r'<th scope="col" class="(?:sortable )?column-(\w+)', html)
    assert columns == [
        "connection",
        "started_at",
        "trigger",
        "mode",
        "outcome",
        "licenses",
        "error_short",
    ]
