"""The service's one web entry point (Procfile, README): the ingestion front door, with Django
behind it.

    uvicorn config.asgi:application --workers 2 --loop uvloop --http httptools

Requests to the ingestion paths are answered by `ingestion.asgi` (group commit, no framework);
every other request (admin, read API, dashboard, /healthz) is served by Django.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_asgi_application()  # sets Django up before the ingestion app loads

from ingestion.asgi import IngestionFrontDoor  # noqa: E402

# django-stubs type ASGIHandler's scope as a dict and its messages as Mapping, narrower than the
# ASGI mutable mappings the door passes on.
application = IngestionFrontDoor(django_application)  # type: ignore[arg-type]
