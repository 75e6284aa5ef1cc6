"""The dashboard's health page learns the connection's state through engagement.health."""

from django.utils import timezone

from engagement.health import connection_health
from marketplace.models import MarketplaceConnection, SyncRun
from tests.marketplace.conftest import connect


def test_a_product_without_a_connection_reports_none(acme, db):
    assert connection_health(product_id=acme.product.id) == []


def test_an_active_connection_reports_its_last_run(acme, db):
    connection = connect(acme)
    SyncRun.objects.filter(connection=connection).update(outcome=SyncRun.Outcome.SUCCEEDED)

    [report] = connection_health(product_id=acme.product.id)

    assert (report.state, report.state_label, report.healthy) == ("active", "Active", True)
    assert report.last_run_outcome == "Succeeded"
    assert report.last_error == ""


def test_a_connection_needing_authentication_is_unhealthy_with_its_error(acme, globex, db):
    connection = connect(acme)
    connect(globex)
    MarketplaceConnection.objects.filter(id=connection.id).update(
        state=MarketplaceConnection.State.REQUIRES_AUTHENTICATION,
        last_error="The marketplace rejected the email and API token (401).",
        last_error_at=timezone.now(),
    )

    [report] = connection_health(product_id=acme.product.id)

    assert report.healthy is False
    assert report.state_label == "Requires authentication"
    assert "401" in report.last_error
