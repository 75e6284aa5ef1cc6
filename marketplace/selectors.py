"""Reads of the marketplace connection: who may manage what, and a connection's status."""

from __future__ import annotations

from datetime import date

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from engagement.memberships import products_managed_by
from marketplace.models import MarketplaceConnection, SyncRun


def products_manageable_by(*, user) -> list[int] | None:
    """Ids of the products whose connection this user may manage in the admin; None means every
    product. Superusers manage all; other staff manage the products they are a manager of (the
    per-product membership granted on the product's admin page).
    """
    if not (user.is_active and user.is_staff):
        return []
    if user.is_superuser:
        return None
    return list(products_managed_by(user).values_list("id", flat=True))


def connections_for(*, user) -> QuerySet[MarketplaceConnection]:
    allowed = products_manageable_by(user=user)
    connections = MarketplaceConnection.objects.select_related("product")
    return connections if allowed is None else connections.filter(product_id__in=allowed)


# Atlassian API tokens live at most a year: warn a month ahead.
TOKEN_WARN_DAYS = 330


def token_age_days(connection: MarketplaceConnection, today: date | None = None) -> int | None:
    """Whole days since the stored token was set; None without a token or its day."""
    if connection.token_set_on is None or not connection.api_token:
        return None
    return ((today or timezone.localdate()) - connection.token_set_on).days


def token_warning(connection: MarketplaceConnection, today: date | None = None) -> str:
    """From TOKEN_WARN_DAYS days on, what to do before the token expires; else ""."""
    age, set_on = token_age_days(connection, today), connection.token_set_on
    if age is None or set_on is None or age < TOKEN_WARN_DAYS:
        return ""
    return (
        f"The API token was set on {set_on.isoformat()}, {age} days ago; "
        "Atlassian API tokens expire within a year. Create a new token and save it with the "
        "connection details before the sync stops with 401."
    )


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def connection_status(*, product_id: int, runs: int = 10) -> dict:
    """The connection's state, app, last success and error, and its latest runs."""
    stored = MarketplaceConnection.objects.filter(product_id=product_id).first()
    if stored is None:
        return {"product_id": product_id, "state": MarketplaceConnection.State.NOT_CONFIGURED}
    latest = SyncRun.objects.filter(connection=stored).order_by("-started_at", "-id")[:runs]
    return {
        "product_id": product_id,
        "state": stored.state,
        "api_url": stored.api_url or settings.MARKETPLACE_API_URL,
        "email": stored.email,
        "vendor_id": stored.vendor_id,
        "developer_id": stored.developer_id,
        "marketplace_product_id": stored.marketplace_product_id,
        "app_name": stored.app_name,
        "schedule_enabled": bool(stored.periodic_task and stored.periodic_task.enabled),
        "token_set_on": _iso(stored.token_set_on),
        "token_age_days": token_age_days(stored),
        "token_warning": token_warning(stored) or None,
        "last_success_at": _iso(stored.last_success_at),
        "last_error": stored.last_error or None,
        "last_error_at": _iso(stored.last_error_at),
        "runs": [
            {
                "id": run.id,
                "trigger": run.trigger,
                "mode": run.mode,
                "last_updated_from": _iso(run.last_updated_from),
                "started_at": _iso(run.started_at),
                "finished_at": _iso(run.finished_at),
                "outcome": run.outcome,
                "pages": run.pages,
                "stage": run.stage,
                "licenses_seen": run.licenses_seen,
                "accounts_matched": run.accounts_matched,
                "accounts_created": run.accounts_created,
                "skipped_without_cloud_id": run.skipped_without_cloud_id,
                "transactions_seen": run.transactions_seen,
                "transactions_skipped": run.transactions_skipped,
                "feedback_seen": run.feedback_seen,
                "accounts_updated": run.accounts_updated,
                "skipped_invalid": run.skipped_invalid,
                "skipped_reasons": run.skipped_reasons,
                "retries": run.retries,
                "note": run.note or None,
                "error": run.error or None,
            }
            for run in latest
        ],
    }
