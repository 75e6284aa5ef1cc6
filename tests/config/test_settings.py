"""Settings: the embedded default needs nothing; production refuses to start without its values."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {
    "DJANGO_ENV": "production",
    "SECRET_KEY": "s" * 50,
    "FIELD_ENCRYPTION_SALT": "salt",
    "DATABASE_URL": "postgres://eds@db.example:5432/eds",
    "CELERY_BROKER_URL": "redis://redis.example:6379/0",
    "ALLOWED_HOSTS": "eds.example.com",
}


def load_settings(env: dict, show: str = "") -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in PRODUCTION and k != "DATA_DIR"}
    clean.update(env)
    return subprocess.run(  # noqa: S603
        [
            sys.executable,
            "-c",
            "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings');"
            "django.setup(); from django.conf import settings;"
            + (
                show or "print(settings.DATABASES['default']['ENGINE'], settings.CELERY_BROKER_URL)"
            ),
        ],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_starts_with_every_required_value():
    result = load_settings(PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "django.db.backends.postgresql",
        "redis://redis.example:6379/0",
    ]


@pytest.mark.parametrize(
    "missing",
    ["SECRET_KEY", "FIELD_ENCRYPTION_SALT", "DATABASE_URL", "CELERY_BROKER_URL", "ALLOWED_HOSTS"],
)
def test_production_refuses_to_start_without(missing):
    result = load_settings({k: v for k, v in PRODUCTION.items() if k != missing})

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert missing in result.stderr


def test_a_malformed_setting_fails_loudly():
    result = load_settings({"INGESTION_MAX_BODY_BYTES": "lots"})

    assert result.returncode != 0
    assert "INGESTION_MAX_BODY_BYTES must be an integer" in result.stderr


def test_the_embedded_default_needs_no_server(tmp_path):
    result = load_settings({"DATA_DIR": str(tmp_path)})

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.sqlite3", "filesystem://"]


def test_env_example_lists_every_setting_the_code_reads():
    import re

    example = (ROOT / ".env.example").read_text()
    listed = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", example, flags=re.M))
    read = set()
    for path in [*ROOT.glob("config/*.py"), *ROOT.glob("*/settings*.py")]:
        pattern = r"env_(?:str|bool|int|list|secret)\(\s*\"([A-Z0-9_]+)\""
        read |= set(re.findall(pattern, path.read_text()))
    assert read - listed == set()


def test_a_replica_url_routes_the_read_api_to_the_replica():
    result = load_settings(
        {**PRODUCTION, "DATABASE_REPLICA_URL": "postgres://eds@replica.example:5432/eds"},
        show="print(settings.DATABASES['replica']['HOST'], *settings.DATABASE_ROUTERS)",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["replica.example", "config.db_routers.ReadApiReplicaRouter"]


def test_a_replica_without_a_primary_is_refused():
    result = load_settings({"DATABASE_REPLICA_URL": "postgres://eds@replica.example:5432/eds"})
    assert result.returncode != 0
    assert "DATABASE_REPLICA_URL" in result.stderr
