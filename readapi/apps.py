from django.apps import AppConfig


class ReadapiConfig(AppConfig):
    name = "readapi"
    verbose_name = "Read API"
