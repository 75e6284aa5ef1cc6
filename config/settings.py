"""Settings, read from environment variables (see .env.example).

Embedded mode (the default) needs no server: SQLite and a filesystem broker under DATA_DIR.
DJANGO_ENV=production refuses to start without its secrets, a database URL and a broker URL.
"""

import os
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config.beat_schedule import beat_schedule
from config.broker_options import filesystem_broker_options
from config.database import databases_from_env
from config.env import (
    check_static_root,
    env_bool,
    env_float,
    env_int,
    env_int_list,
    env_list,
    env_path,
    env_rate,
    env_secret,
    env_str,
    load_env_file,
    proxy_ssl_header,
)

BASE_DIR = Path(__file__).resolve().parent.parent
# A .env in the project directory (or the file ENV_FILE names) fills in what the process's own
# environment does not set: the command line always wins over the file.
load_env_file(Path(os.environ.get("ENV_FILE") or BASE_DIR / ".env"))
DJANGO_ENV = env_str("DJANGO_ENV", "embedded")
if DJANGO_ENV not in {"embedded", "production"}:
    raise ImproperlyConfigured(f"DJANGO_ENV must be 'embedded' or 'production', got {DJANGO_ENV!r}")
PRODUCTION = DJANGO_ENV == "production"
DATA_DIR = env_path("DATA_DIR", BASE_DIR / ".data", base_dir=BASE_DIR)

# Metrics (GET /metrics, docs/operations.md): the bearer token a scraper sends (empty: the
# endpoint answers 404). Every process of this host writes its counters to files in
# PROMETHEUS_MULTIPROC_DIR, which prometheus_client reads from the environment when a metric is
# first counted: it is set here, before any app module loads.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
PROMETHEUS_MULTIPROC_DIR = env_path(
    "PROMETHEUS_MULTIPROC_DIR", DATA_DIR / "metrics", base_dir=BASE_DIR
)
PROMETHEUS_MULTIPROC_DIR.mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(PROMETHEUS_MULTIPROC_DIR)

SECRET_KEY = env_secret(
    "SECRET_KEY", production=PRODUCTION, embedded_default="embedded-mode-only-not-secret"
)
# Encrypts marketplace credentials at rest (django-fernet-encrypted-fields).
SALT_KEY = env_list("FIELD_ENCRYPTION_SALT", [])
if not SALT_KEY:
    SALT_KEY = [
        env_secret("FIELD_ENCRYPTION_SALT", production=PRODUCTION, embedded_default="embedded-salt")
    ]

# Off unless the developer turns it on (DEBUG=1): Django's debug page shows a failing request's
# local values, and with it on every mode would show them to whoever reaches the page.
DEBUG = env_bool("DEBUG", False)
# Values marked sensitive (the marketplace API token) stay hidden on the debug page too.
DEFAULT_EXCEPTION_REPORTER_FILTER = "config.debug.AlwaysSafeExceptionReporterFilter"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["*"])
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS is required when DJANGO_ENV=production")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "axes",
    "config",
    "engagement",
    "ingestion",
    "readapi",
    "marketplace",
    "dashboard",
    "automations",
]

MIDDLEWARE = [
    # First, so it counts every answer, the other middleware's included.
    "config.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # WhiteNoise: STATIC_ROOT, and the apps' own files when collectstatic has not run.
    "config.static.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A page's query string with a NUL byte (or an admin date part no date holds): a 400 page.
    "config.page_queries.PageQueryMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # A view that cannot reach the database (a restart, an outage): 503 with Retry-After, not 500.
    "config.errors.DependencyDownMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its lockout response.
    "axes.middleware.AxesMiddleware",
]

# Admin logins are throttled by django-axes: AxesStandaloneBackend refuses a locked-out
# username+IP before ModelBackend checks the password.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = 10
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # its banner goes to stdout, into every --json command output
# The username axes records, cut to its varchar(255) column (the sign-in forms refuse longer).
AXES_USERNAME_CALLABLE = "config.login.axes_username"

# The dashboard signs people in with the admin's accounts (Django's auth) at its own page.
LOGIN_URL = "dashboard:login"
LOGIN_REDIRECT_URL = "dashboard:home"
LOGOUT_REDIRECT_URL = "dashboard:login"

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # config/templates: the admin's base_site.html, ahead of django.contrib.admin's own.
        "DIRS": [BASE_DIR / "config" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
# DATABASE_URL (PostgreSQL, pooled) or the embedded SQLite file; DATABASE_REPLICA_URL: a streaming
# replica the read API reads from (config/database.py).
_database_url = env_str("DATABASE_URL", "")
DATABASES, DATABASE_ROUTERS = databases_from_env(
    database_url=_database_url,
    replica_url=env_str("DATABASE_REPLICA_URL", ""),
    production=PRODUCTION,
    data_dir=DATA_DIR,
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# PostgreSQL: how long a statement of `migrate` waits for a lock before it fails (0: no limit).
# A statement waiting for a table's lock queues every later reader and writer of that table
# behind it, the door's inserts included; failing after a moment and trying again later is
# better (config/management/commands/migrate.py, docs/deployment.md).
MIGRATION_LOCK_TIMEOUT_SECONDS = env_int("MIGRATION_LOCK_TIMEOUT_SECONDS", 2, minimum=0)

# --- Celery ---------------------------------------------------------------------------------
_broker_url = env_str("CELERY_BROKER_URL", "")
if PRODUCTION and not _broker_url:
    raise ImproperlyConfigured("CELERY_BROKER_URL is required when DJANGO_ENV=production")
if _broker_url:
    CELERY_BROKER_URL = _broker_url
    CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
else:
    # A serverless broker for the embedded mode: messages are files in DATA_DIR/broker. (With a
    # host: kombu warns "No hostname was supplied" on every connection to a bare filesystem://.)
    CELERY_BROKER_URL = "filesystem://localhost/"
    CELERY_BROKER_TRANSPORT = "config.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = filesystem_broker_options(DATA_DIR / "broker")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULE = beat_schedule(
    sweep_seconds=env_int("INGESTION_SWEEP_SECONDS", 10, minimum=1),
    refresh_seconds=env_int("SCORING_REFRESH_SECONDS", 10, minimum=1),
)

# --- Ingestion ------------------------------------------------------------------------------
INGESTION_MAX_BODY_BYTES = env_int("INGESTION_MAX_BODY_BYTES", 32 * 1024, minimum=1024)
INGESTION_MAX_BATCH_BYTES = env_int("INGESTION_MAX_BATCH_BYTES", 512 * 1024, minimum=1024)
# Past this many accepted-but-unapplied requests the front door answers 503 with Retry-After.
INGESTION_BACKLOG_LIMIT = env_int("INGESTION_BACKLOG_LIMIT", 1_000_000, minimum=1)
INGESTION_RETRY_AFTER_SECONDS = env_int("INGESTION_RETRY_AFTER_SECONDS", 5, minimum=1)
# Messages a worker applies per transaction. Bigger batches share each statement's fixed cost
# and each user's row (bench/bench_ingest.py --drain-only on PostgreSQL: 40,000 was the fastest
# of 10,000 to 80,000). The embedded mode keeps 10,000: on SQLite the front door waits for the
# drain's write lock, so a shorter transaction keeps its answers quick.
INGESTION_DRAIN_BATCH = env_int(
    "INGESTION_DRAIN_BATCH", 40_000 if _database_url else 10_000, minimum=1
)
# A web process wakes a worker to drain at most this often (ms) while it stores requests; the
# requests of the interval share one drain. Each drain has a fixed cost (claims, staging, the
# score refresh it queues), and at 50 ms a steady stream ran many small drains that took the
# CPU the door and the refresh needed: at 310 messages a second, 200 ms gave event to score
# p95 1.27-1.29 s against 1.66-1.68, door p99 22-24 ms against 35-37, the machine 1.77 cores
# busy against 1.96 (docs/benchmarks.md, 2026-11-29).
INGESTION_WAKE_UP_MS = env_int("INGESTION_WAKE_UP_MS", 200, minimum=1)
# Database connections a worker drains a backlog on at once (PostgreSQL; SQLite takes one writer).
INGESTION_DRAIN_CONNECTIONS = env_int("INGESTION_DRAIN_CONNECTIONS", 2, minimum=1)
INGESTION_DROP_RETENTION_DAYS = env_int("INGESTION_DROP_RETENTION_DAYS", 30, minimum=1)
# A repeated Segment `messageId` is applied once if it comes within this many days. One, as
# Segment's own (about 24 hours): the dedup table holds every id of the window, and its size,
# not the events', is what slows the worker as it grows (docs/scaling.md).
INGESTION_DEDUP_DAYS = env_int("INGESTION_DEDUP_DAYS", 1, minimum=1)
# A client `sentAt` further than this from our clock is clock skew and corrected; nearer is
# network delay and left alone.
INGESTION_CLOCK_SKEW_SECONDS = env_int("INGESTION_CLOCK_SKEW_SECONDS", 5, minimum=0)
# How far apart the clocks of the machines running web servers, workers and the database may be
# (keep them NTP-synchronised). A drain task queued more than this before a drain that caught up
# began is skipped without a query (ingestion.tasks): every write queues one, and the refresh a
# change queues waits behind them on the same queue (5 s held 130-170 of them, and each new score
# about 3 s, at 120 messages a second: docs/benchmarks.md, 2026-11-28). On PostgreSQL a refresh
# re-reads the changes stamped this much (and 100 ms) before its watermark
# (engagement/scoring/changes.py). Too small for the real skew, a request waits for the next task
# or the sweep (it is never lost), and a change stamped on a machine whose clock runs behind may
# wait for the next change to its user or account, or the day's full rescore.
INGESTION_HOSTS_CLOCK_SKEW_MS = env_int("INGESTION_HOSTS_CLOCK_SKEW_MS", 250, minimum=0)
# Requests per ingestion key, e.g. 100/second, counted in the shared cache (CACHE_URL); off by
# default. Over it: 429 with Retry-After.
INGESTION_KEY_RATE_LIMIT = env_rate("INGESTION_KEY_RATE_LIMIT", "off")

# --- Scoring --------------------------------------------------------------------------------
# The sweep's period: beat checks the workspaces that changed or are due (a day ended, a refresh
# lost) this often. Changes themselves queue their refresh (engagement/scoring/demand.py).
SCORING_REFRESH_SECONDS = env_int("SCORING_REFRESH_SECONDS", 10, minimum=1)
# A refresh queued by a change starts this long after it, scoring the changes of that while
# together; under a steady stream refreshes run back to back whatever this is (docs/freshness.md).
SCORING_REFRESH_DELAY_MS = env_int("SCORING_REFRESH_DELAY_MS", 250, minimum=0)
# How long the record of applied event batches (EventActivity) is kept for incremental refreshes;
# a workspace last scored before that is rescored in full.
SCORING_ACTIVITY_KEEP_MINUTES = env_int("SCORING_ACTIVITY_KEEP_MINUTES", 30, minimum=5)
# How long a writing transaction may take to commit, for what cannot see open transactions: a
# refresh on SQLite re-reads changes this far behind its watermark (on PostgreSQL the watermark
# stops at the oldest transaction still writing, and the re-read covers clocks only:
# INGESTION_HOSTS_CLOCK_SKEW_MS and 100 ms, see engagement/scoring/changes.py); users counted, and
# today's history noted as a past day, allow for commits this late.
SCORING_WATERMARK_OVERLAP_SECONDS = env_int("SCORING_WATERMARK_OVERLAP_SECONDS", 30, minimum=0)
# An incremental refresh of a large workspace takes p90 over every score row (a pass over all of
# them) at most this often; between, it scores the changed users against the p90 kept, and a
# score may differ from its exact value by p90's relative move over this while (docs/scoring.md).
# 0: every refresh, exact.
SCORING_P90_SECONDS = env_int("SCORING_P90_SECONDS", 60, minimum=0)
# ... in workspaces of at least this many scored users; below, every refresh takes p90 exactly.
SCORING_P90_EXACT_USERS = env_int("SCORING_P90_EXACT_USERS", 100_000, minimum=0)
# PostgreSQL work_mem for a refresh's aggregations (SET LOCAL: this transaction only).
SCORING_WORK_MEM_MB = env_int("SCORING_WORK_MEM_MB", 256, minimum=4)
# PostgreSQL random_page_cost for an incremental refresh (SET LOCAL); 0 keeps the server's. The
# rows it reads by index were just touched and sit in memory (docs/scoring.md).
SCORING_RANDOM_PAGE_COST = env_float("SCORING_RANDOM_PAGE_COST", 1.1, minimum=0)
# PostgreSQL: a full rescore and a history build compute their accounts on a second connection,
# beside the users (engagement/scoring/alongside.py); off, one connection.
SCORING_ACCOUNTS_ALONGSIDE = env_bool("SCORING_ACCOUNTS_ALONGSIDE", True)
# Raw events older than this are deleted (whole daily partitions on PostgreSQL); the daily
# rollups that scores read are kept.
EVENTS_RETENTION_DAYS = env_int("EVENTS_RETENTION_DAYS", 90, minimum=1)
# PostgreSQL: each hourly run stores at most this many ended days of a product's rollups again by
# account, then user (docs/scoring.md); a new install's earlier days are caught up over a few runs.
ROLLUPS_ORDER_DAYS_PER_RUN = env_int("ROLLUPS_ORDER_DAYS_PER_RUN", 3, minimum=1)
# Segment joins and leaves (the segment page's chart) older than this many days are deleted.
SEGMENT_CHANGES_RETENTION_DAYS = env_int("SEGMENT_CHANGES_RETENTION_DAYS", 400, minimum=1)

# --- Automations ----------------------------------------------------------------------------
# Where people reach this service: the links in webhook bodies and Slack messages start with it.
# By default the address make run serves on: its processes get the web port as WEB_PORT (honcho
# gives each its own PORT); elsewhere PORT, as platforms that set one mean it, else 8000.
_WEB_PORT = env_int("WEB_PORT", env_int("PORT", 8000, minimum=1), minimum=1)
PUBLIC_URL = env_str("PUBLIC_URL", f"http://127.0.0.1:{_WEB_PORT}").rstrip("/")
# Deliveries to private, loopback or link-local addresses are refused unless this is true
# (an on-premises receiver, the tests).
AUTOMATION_ALLOW_PRIVATE_URLS = env_bool("AUTOMATION_ALLOW_PRIVATE_URLS", False)
# Seconds before each attempt of a delivery (the first is immediate); comma-separated.
AUTOMATION_RETRY_SCHEDULE = env_int_list(
    "AUTOMATION_RETRY_SCHEDULE", [0, 5, 300, 1800, 7200, 18000, 36000, 36000]
)
# An attempt holds its delivery this long; past it, a delivery whose worker died is sent again.
AUTOMATION_LEASE_SECONDS = env_int("AUTOMATION_LEASE_SECONDS", 60, minimum=1)
# An endpoint that has failed every attempt for this long is disabled.
AUTOMATION_DISABLE_AFTER_SECONDS = env_int(
    "AUTOMATION_DISABLE_AFTER_SECONDS", 5 * 24 * 3600, minimum=60
)
# At most this many single messages per automation and refresh; past it, one digest counts the
# rest (a marketplace sync, an import or a backfill can bring hundreds of subjects at once).
AUTOMATION_MAX_PER_REFRESH = env_int("AUTOMATION_MAX_PER_REFRESH", 20, minimum=1)

# --- Marketplace ----------------------------------------------------------------------------
MARKETPLACE_API_URL = env_str("MARKETPLACE_API_URL", "https://api.atlassian.com").rstrip("/")

# --- Cache and read API ---------------------------------------------------------------------
# The read API's per-token throttle counts in this cache. Set CACHE_URL (or REDIS_URL) to a Redis
# URL so every web process shares the counts; without it each process counts on its own.
_cache_url = env_str("CACHE_URL", "") or env_str("REDIS_URL", "")
if _cache_url:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _cache_url,
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Whether every process of the installation sees the same cache: only then may one process rely
# on what another marked there (ingestion/wakeups.py).
CACHE_SHARED = bool(_cache_url)
# Requests per API token, "<n>/<second|minute|hour|day>"; "off" turns throttling off (empty: the
# default, as for every setting).
READ_API_THROTTLE_RATE = env_rate("READ_API_THROTTLE_RATE", "1200/minute")
# Totals of the ranked account and user lists are cached this long (0: count on every request).
READ_API_COUNTS_CACHE_SECONDS = env_int("READ_API_COUNTS_CACHE_SECONDS", 10, minimum=0)

# --- REST framework -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "config.exceptions.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Engagement Data Service",
    "DESCRIPTION": "Ingestion API (v1, v2, Segment-family) and read API.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # /api/docs/ works offline: Swagger UI and Redoc come from the pinned sidecar package, served
    # as the service's own static files, never from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        # The ingestion door is no Django view: its paths come from ingestion.acceptance.
        "ingestion.schema.ingestion_paths",
        "readapi.schema.postprocess",
        # The automations' webhook events (x-webhooks), documented with an example each.
        "automations.schema.automation_webhooks",
    ],
}

# --- Static files, i18n, logging -----------------------------------------------------------
STATIC_URL = "static/"
# The dashboard's chart library comes from the pinned plotly package (dashboard/staticfiles.py).
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "dashboard.staticfiles.PlotlyFinder",
]
STATIC_ROOT = env_path("STATIC_ROOT", DATA_DIR / "static", base_dir=BASE_DIR)
# Pages are styled even when collectstatic has not run: the finders' files are served for every
# path STATIC_ROOT lacks (config/static.py).
WHITENOISE_USE_FINDERS = True
check_static_root(STATIC_ROOT, base_dir=BASE_DIR, data_dir=DATA_DIR)
if not PRODUCTION:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

if PRODUCTION:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
    # HTTPS only: browsers are told to come back over HTTPS for a year (the header is ignored on
    # plain HTTP, so it costs nothing there).
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
    # Off by default so plain-HTTP setups (local production runs, tests, benchmarks) keep working;
    # the README's production variables turn it on. /healthz is never redirected (probes).
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    # Behind a TLS-terminating proxy: the header it sets to "https" (e.g. X-Forwarded-Proto).
    # Only set it when the proxy always sets (or strips) that header.
    SECURE_PROXY_SSL_HEADER = proxy_ssl_header("SECURE_PROXY_SSL_HEADER")
