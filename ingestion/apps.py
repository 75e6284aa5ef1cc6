from django.apps import AppConfig


class IngestionConfig(AppConfig):
    name = "ingestion"
    verbose_name = "Ingestion"

    def ready(self) -> None:
        from engagement.erasure_hooks import ErasureStage, erasure_hook_register
        from engagement.health import ingestion_provider_register, key_origins_setter_register
        from ingestion.erasure import ingestion_erase, waiting_messages_erase
        from ingestion.health import ingestion_health_for
        from ingestion.services.keys import product_key_origins_set

        ingestion_provider_register(ingestion_health_for)
        key_origins_setter_register(product_key_origins_set)
        erasure_hook_register(waiting_messages_erase, stage=ErasureStage.BEFORE_TARGET)
        erasure_hook_register(ingestion_erase)
