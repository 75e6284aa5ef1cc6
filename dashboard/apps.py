from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The product teams' web pages: scores, accounts, users, segments, ingestion health."""

    name = "dashboard"
    verbose_name = "Dashboard"
