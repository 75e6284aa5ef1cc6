from django.apps import AppConfig


class EngagementConfig(AppConfig):
    name = "engagement"
    verbose_name = "Engagement"

    def ready(self) -> None:
        # Registers the tasks that services start by name (engagement.tasks imports the services).
        from engagement import tasks  # noqa: F401
