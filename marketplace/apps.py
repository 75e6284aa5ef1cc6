from django.apps import AppConfig


class MarketplaceConfig(AppConfig):
    name = "marketplace"
    verbose_name = "Marketplace"

    def ready(self) -> None:
        from marketplace import signals  # noqa: F401  (connects the receivers)
