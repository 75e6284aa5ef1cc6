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


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("cheap", "SCORING_RANDOM_PAGE_COST must be a finite number, got 'cheap'"),
        ("nan", "SCORING_RANDOM_PAGE_COST must be a finite number, got 'nan'"),
        ("-1", "SCORING_RANDOM_PAGE_COST must be at least 0, got -1.0"),
    ],
)
def test_a_malformed_number_fails_loudly(value, message):
    result = load_settings({"SCORING_RANDOM_PAGE_COST": value})

    assert result.returncode != 0
    assert message in result.stderr


def test_a_number_setting_reads_decimals():
    result = load_settings(
        {"SCORING_RANDOM_PAGE_COST": "1.5"}, show="print(settings.SCORING_RANDOM_PAGE_COST)"
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1.5"


def test_the_embedded_default_needs_no_server(tmp_path):
    result = load_settings({"DATA_DIR": str(tmp_path)})

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.sqlite3", "filesystem://localhost/"]


def test_the_embedded_broker_sends_a_task_without_a_warning(tmp_path):
    """kombu warned "No hostname was supplied. Reverting to default 'localhost'" on every
    connection to `filesystem://`: in marketplace_connect, _sync, _status and the worker logs."""
    result = load_settings(
        {"DATA_DIR": str(tmp_path)},
        show="from config.celery import app;"
        "app.send_task('marketplace.tasks.sync_runs_close_dead', queue='marketplace');"
        "print(len(list((settings.DATA_DIR / 'broker' / 'queue').iterdir())))",
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1"]
    assert result.stderr == ""


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


# --- Empty values, the static root, .env, deployment checks ----------------------------------


def test_an_empty_value_means_the_default(tmp_path):
    result = load_settings(
        {
            "DATA_DIR": str(tmp_path),
            "ENV_FILE": os.devnull,
            "STATIC_ROOT": "",
            "ALLOWED_HOSTS": "",
            "DEBUG": "",
            "INGESTION_DEDUP_DAYS": "",
            "READ_API_THROTTLE_RATE": "",
            "MARKETPLACE_API_URL": "",
            "LOG_LEVEL": "",
        },
        show="print(settings.STATIC_ROOT, settings.ALLOWED_HOSTS, settings.DEBUG,"
        " settings.INGESTION_DEDUP_DAYS, settings.READ_API_THROTTLE_RATE,"
        " settings.MARKETPLACE_API_URL, settings.LOGGING['root']['level'])",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        str((tmp_path / "static").resolve()),
        "['*']",
        "False",
        "1",
        "1200/minute",
        "https://api.atlassian.com",
        "INFO",
    ]


def test_throttling_is_turned_off_by_off():
    result = load_settings(
        {"ENV_FILE": os.devnull, "READ_API_THROTTLE_RATE": "off"},
        show="print(repr(settings.READ_API_THROTTLE_RATE))",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "''"


@pytest.mark.parametrize(
    "env",
    [
        {"STATIC_ROOT": "."},
        {"STATIC_ROOT": str(ROOT)},
        {"STATIC_ROOT": str(ROOT.parent)},
        {"STATIC_ROOT": "/"},
        {"STATIC_ROOT": ".data", "DATA_DIR": ""},
        {"STATIC_ROOT": "{data}"},
        {"STATIC_ROOT": "{data}/.."},
    ],
)
def test_the_static_root_cannot_expose_the_project_or_the_data(env, tmp_path):
    data = tmp_path / "data"
    env = {k: v.format(data=data) for k, v in env.items()}
    result = load_settings({"DATA_DIR": str(data), "ENV_FILE": os.devnull, **env})

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "STATIC_ROOT" in result.stderr


def test_relative_directories_are_taken_from_the_project_directory(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'config.settings';"
            "django.setup(); from django.conf import settings; print(settings.DATA_DIR)",
        ],
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if k not in PRODUCTION},
            "PYTHONPATH": str(ROOT),
            "DATA_DIR": ".data",
            "ENV_FILE": os.devnull,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(ROOT / ".data")


SHOW_MARKETPLACE = "print(settings.MARKETPLACE_API_URL)"


def env_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / ".env"
    path.write_text(text)
    return path


def test_a_dotenv_file_fills_in_what_the_environment_does_not_set(tmp_path):
    path = env_file(tmp_path, "# a comment\nexport MARKETPLACE_API_URL='http://from-file'\n")
    env = {k: v for k, v in os.environ.items() if k != "MARKETPLACE_API_URL"}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE',"
            " 'config.settings'); django.setup(); from django.conf import settings;"
            + SHOW_MARKETPLACE,
        ],
        cwd=ROOT,
        env={**env, "ENV_FILE": str(path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "http://from-file"


@pytest.mark.parametrize(
    ("value", "expected"),
    [("http://from-cli", "http://from-cli"), ("", "https://api.atlassian.com")],
)
def test_the_environment_wins_over_a_dotenv_file(tmp_path, value, expected):
    path = env_file(tmp_path, "MARKETPLACE_API_URL=http://from-file\n")
    result = load_settings(
        {"ENV_FILE": str(path), "MARKETPLACE_API_URL": value}, show=SHOW_MARKETPLACE
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_make_run_starts_its_processes_with_the_command_lines_values(tmp_path):
    """`make run` starts the processes with honcho, which by default reads .env from the app root
    and lets its values override the environment. The Makefile tells it to read no file; the
    service reads .env itself, below the environment."""
    makefile = (ROOT / "Makefile").read_text()
    honcho_line = next(line for line in makefile.splitlines() if "honcho start" in line)
    assert honcho_line.rstrip().endswith("-e /dev/null")

    app = tmp_path / "app"
    app.mkdir()
    dotenv = env_file(app, "MARKETPLACE_API_URL=http://from-file\n")
    (app / "Procfile").write_text(
        f'show: {sys.executable} -c "import django, os; os.environ.setdefault('
        "'DJANGO_SETTINGS_MODULE', 'config.settings'); django.setup();"
        " from django.conf import settings; print('URL=' + settings.MARKETPLACE_API_URL)\"\n"
    )
    env = {
        **{k: v for k, v in os.environ.items() if k not in PRODUCTION},
        "PYTHONPATH": str(ROOT),
        "DATA_DIR": str(tmp_path / "data"),
        "ENV_FILE": str(dotenv),
        "MARKETPLACE_API_URL": "http://from-cli",
    }
    honcho = [sys.executable, "-m", "honcho", "start", "-f", "Procfile", "-d", str(app)]
    result = subprocess.run(
        [*honcho, "-e", "/dev/null"], cwd=app, env=env, capture_output=True, text=True, timeout=60
    )
    assert "URL=http://from-cli" in result.stdout, result.stdout + result.stderr
    # Without the flag honcho itself would have put the file's value first.
    result = subprocess.run(honcho, cwd=app, env=env, capture_output=True, text=True, timeout=60)
    assert "URL=http://from-file" in result.stdout, result.stdout + result.stderr


# The README's production variables (a real-looking secret: check --deploy rejects weak keys).
DOCUMENTED_PRODUCTION = {
    **PRODUCTION,
    "SECRET_KEY": "k8Jx2-vQ9rT7mZp4LwN6yHc3Bd5Fg1Sa0Ue8Ri2Oo7Pl9Kj4Hh6Gf3Dd5Ss1Aa0Qq",
    "SECURE_SSL_REDIRECT": "true",
    "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
}


def test_check_deploy_is_clean_with_the_documented_production_variables():
    readme = (ROOT / "README.md").read_text()
    for name in ("SECURE_SSL_REDIRECT=true", "SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto"):
        assert name in readme
    env = {k: v for k, v in os.environ.items() if k not in PRODUCTION and k != "DATA_DIR"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={**env, "ENV_FILE": os.devnull, **DOCUMENTED_PRODUCTION},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_security_settings_come_from_the_environment():
    result = load_settings(
        {**DOCUMENTED_PRODUCTION, "ENV_FILE": os.devnull, "SECURE_HSTS_SECONDS": "60"},
        show="print(settings.SECURE_HSTS_SECONDS, settings.SECURE_HSTS_INCLUDE_SUBDOMAINS,"
        " settings.SECURE_HSTS_PRELOAD, settings.SECURE_SSL_REDIRECT,"
        " *settings.SECURE_PROXY_SSL_HEADER)",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "60",
        "True",
        "True",
        "True",
        "HTTP_X_FORWARDED_PROTO",
        "https",
    ]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "http://127.0.0.1:8000"),
        ({"WEB_PORT": "8101", "PORT": "5000"}, "http://127.0.0.1:8101"),  # make run, under honcho
        ({"PORT": "8101"}, "http://127.0.0.1:8101"),
        ({"PORT": "8101", "PUBLIC_URL": "https://eds.example.com/"}, "https://eds.example.com"),
    ],
)
def test_public_url_follows_the_port_make_run_serves_on(env, expected):
    clean = {"WEB_PORT": "", "PORT": "", "PUBLIC_URL": "", **env}
    result = load_settings(clean, show="print(settings.PUBLIC_URL)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected
