"""The Celery application: `celery -A config worker` and `celery -A config beat`.

Three queues: `celery` (ingestion, scoring, maintenance), `marketplace` (license syncs) and
`automations` (webhook and Slack deliveries), each served by its own worker process (Procfile),
so a slow or rate-limited marketplace or receiver never delays ingestion or scoring.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

MARKETPLACE_QUEUE = "marketplace"
AUTOMATIONS_QUEUE = "automations"

# Celery's Django fix-up, but keeping each worker process's connection pool across its tasks
# (config/celery_fixup.py).
app = Celery("config", fixups=["config.celery_fixup:fixup"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_routes = {
    "marketplace.tasks.*": {"queue": MARKETPLACE_QUEUE},
    "automations.tasks.*": {"queue": AUTOMATIONS_QUEUE},
}
app.autodiscover_tasks()
