from django.apps import AppConfig


class MarketplaceConfig(AppConfig):
    name = "marketplace"
    verbose_name = "Marketplace"

    def ready(self) -> None:
        # signals connects the receivers; tasks registers the tasks that services start by name.
        from engagement.health import connection_provider_register
        from marketplace import signals, tasks  # noqa: F401
        from marketplace.health import connection_health_for

        connection_provider_register(connection_health_for)
