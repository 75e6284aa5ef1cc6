"""Settings of bench_ingest's Django yardstick: a plain Django project as people deploy one.

Not the service's settings: no middleware (the view needs none), one installed app (the bench's
model), PostgreSQL through psycopg 3 with persistent connections (CONN_MAX_AGE, as Django's
deployment checklist advises), served by gunicorn's sync workers (bench/bare_wsgi.py). The gap
to the ingestion door is then what a framework-free door with group commit saves over Django's
request cycle and one committed INSERT per request.
"""

import os
from urllib.parse import urlsplit

_database = urlsplit(os.environ["DATABASE_URL"])  # bench_ingest sets it: its own database

SECRET_KEY = "bench-only-secret-key-not-for-production-use-0123456789"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = ["bench"]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "bench.bare_urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _database.path.lstrip("/"),
        "USER": _database.username or "postgres",
        "PASSWORD": _database.password or "",
        "HOST": _database.hostname or "127.0.0.1",
        "PORT": str(_database.port or 5432),
        "CONN_MAX_AGE": 600,
    }
}
