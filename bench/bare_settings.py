"""The service's own settings with a bench-only URLconf: the bare Django view of bench_ingest."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.bare_urls"
