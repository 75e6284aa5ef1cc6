from django.apps import AppConfig


class IngestionConfig(AppConfig):
    name = "ingestion"
    verbose_name = "Ingestion"

    def ready(self) -> None:
        from engagement.health import ingestion_provider_register
        from ingestion.health import ingestion_health_for

        ingestion_provider_register(ingestion_health_for)
