from django.apps import AppConfig


class ConfigConfig(AppConfig):
    """The project package as an app: it wires the others (operator commands, health)."""

    name = "config"
    verbose_name = "Service"
