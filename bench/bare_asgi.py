"""The bare Django view of bench_ingest under the service's one server (uvicorn): Django's own
ASGI handler with the bench-only URLconf, no ingestion door."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.bare_settings")
application = get_asgi_application()
