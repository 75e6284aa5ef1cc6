"""The Celery application: `celery -A config worker` and `celery -A config beat`.

Two queues: `celery` (ingestion, scoring, maintenance) and `marketplace` (license syncs), each
served by its own worker process (Procfile), so a slow or rate-limited marketplace never
delays ingestion or scoring.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

MARKETPLACE_QUEUE = "marketplace"

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_routes = {"marketplace.tasks.*": {"queue": MARKETPLACE_QUEUE}}
app.autodiscover_tasks()
