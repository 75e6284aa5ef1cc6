from django.apps import AppConfig


class AutomationsConfig(AppConfig):
    """Automations: triggers on what the score refresh saw, signed webhook and Slack deliveries,
    and the score sync to a Segment-compatible API. Engagement never imports this app: it
    subscribes to the refresh's announcements (engagement/refresh_hooks.py) here."""

    name = "automations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from automations.services import refresh_evaluate
        from engagement.refresh_hooks import refresh_hook_register

        refresh_hook_register(refresh_evaluate)
