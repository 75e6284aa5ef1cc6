from django.apps import AppConfig


class ReadapiConfig(AppConfig):
    name = "readapi"
    verbose_name = "Read API"

    def ready(self) -> None:
        from readapi import schema  # noqa: F401 (registers the OpenAPI auth extension)
