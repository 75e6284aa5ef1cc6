"""The WSGI entry of bench_ingest's Django yardstick, for gunicorn's sync workers:
`gunicorn bench.bare_wsgi:application --workers <cores x 2 + 1>`."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.bare_settings")
application = get_wsgi_application()
