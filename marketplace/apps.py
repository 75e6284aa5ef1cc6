from django.apps import AppConfig


class MarketplaceConfig(AppConfig):
    name = "marketplace"
    verbose_name = "Marketplace"

    def ready(self) -> None:
        from engagement.health import connection_provider_register
        from marketplace import signals  # noqa: F401  (connects the receivers)
        from marketplace.health import connection_health_for

        connection_provider_register(connection_health_for)
