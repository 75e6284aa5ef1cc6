"""The marketplace connection as engagement's health record, for the dashboard's health page."""

from engagement.health import ConnectionHealth
from marketplace.models import MarketplaceConnection, SyncRun
from marketplace.selectors import token_warning


def connection_health_for(product_id: int) -> list[ConnectionHealth]:
    connection = (
        MarketplaceConnection.objects.filter(product_id=product_id)
        .exclude(state=MarketplaceConnection.State.NOT_CONFIGURED)
        .first()
    )
    if connection is None:
        return []
    last_run = SyncRun.objects.filter(connection=connection).order_by("-started_at", "-id").first()
    state = MarketplaceConnection.State(connection.state)
    app = connection.app_name or connection.marketplace_product_id
    return [
        ConnectionHealth(
            name=f"Atlassian Marketplace: {app}",
            state=state.value,
            state_label=state.label,
            healthy=state == MarketplaceConnection.State.ACTIVE and not connection.last_error,
            last_run_at=last_run.started_at if last_run else None,
            last_run_outcome=last_run.get_outcome_display() if last_run else "",
            last_success_at=connection.last_success_at,
            last_error=connection.last_error,
            last_error_at=connection.last_error_at,
            warning=token_warning(connection),
        )
    ]
