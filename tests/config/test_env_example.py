""".env.example as it is: every default it writes is the code's default, and the service starts
on it loaded verbatim (empty values included) and answers /healthz."""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / ".env.example"
REQUIRED_IN_PRODUCTION = {
    "SECRET_KEY": "test-only-" + "k" * 40,
    "FIELD_ENCRYPTION_SALT": "test-only-salt",
    "DATABASE_URL": "postgres://eds@db.example:5432/eds",
    "CELERY_BROKER_URL": "redis://redis.example:6379/0",
    "ALLOWED_HOSTS": "eds.example.com",
}
# Every setting, as text (without the addresses of objects), so two loads can be compared whole.
DUMP = (
    "import django, json, os, re;"
    "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings');"
    "django.setup(); from django.conf import settings;"
    "print(json.dumps({n: re.sub(' at 0x[0-9a-f]+', '', repr(getattr(settings, n)))"
    " for n in dir(settings) if n.isupper()}))"
)


def example() -> dict[str, str]:
    """The file as `set -a; . ./.env.example` would export it (values verbatim, empty included)."""
    pairs = re.findall(r"^([A-Z][A-Z0-9_]*)=(.*)$", EXAMPLE.read_text(), flags=re.M)
    return dict(pairs)


def base_env() -> dict[str, str]:
    """This process's environment without any variable the example sets, and no .env file."""
    listed = example()
    env = {k: v for k, v in os.environ.items() if k not in listed}
    env["ENV_FILE"] = os.devnull
    return env


def dump(env: dict) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", DUMP], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def differences(with_example: dict, without: dict) -> dict:
    return {
        name: (with_example.get(name), without.get(name))
        for name in with_example.keys() | without.keys()
        if with_example.get(name) != without.get(name)
    }


def make_port(tmp_path, env_file_text: str | None, **variables: str) -> str:
    """The PORT make run would use, with this .env (None: no file) and these variables in
    make's environment."""
    env_file = tmp_path / ".env"
    if env_file_text is not None:
        env_file.write_text(env_file_text)
    env = {k: v for k, v in os.environ.items() if k not in {"PORT", "ENV_FILE"}}
    result = subprocess.run(
        ["make", "-s", "--eval", "show-port: ; @echo $(PORT)", "show-port",
         f"ENV_FILE={env_file}"],
        cwd=ROOT, env={**env, **variables}, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_makefile_reads_port_from_the_env_file(tmp_path):
    assert make_port(tmp_path, None) == example()["PORT"] == "8000"
    assert make_port(tmp_path, EXAMPLE.read_text()) == "8000"
    assert make_port(tmp_path, EXAMPLE.read_text().replace("PORT=8000", "PORT=8123")) == "8123"
    assert make_port(tmp_path, "PORT=\n") == "8000"  # empty means the default, as for the rest


def test_port_in_the_environment_wins_over_the_env_file(tmp_path):
    assert make_port(tmp_path, "PORT=8123\n", PORT="8001") == "8001"


def test_every_variable_in_the_example_is_read_by_the_code():
    read = set()
    for path in ROOT.glob("config/*.py"):
        read |= set(re.findall(r"env_\w+\(\s*\"([A-Z0-9_]+)\"", path.read_text()))
        read |= set(re.findall(r"proxy_ssl_header\(\"([A-Z0-9_]+)\"", path.read_text()))
    assert set(example()) - read == set()  # PORT is the Makefile's too (checked above)


def test_the_examples_values_are_the_embedded_defaults():
    with_example = dump({**base_env(), **example()})
    without = dump(base_env())

    assert differences(with_example, without) == {}


def test_the_examples_values_are_the_production_defaults():
    production = {"DJANGO_ENV": "production", **REQUIRED_IN_PRODUCTION}
    with_example = dump({**base_env(), **example(), **production})
    without = dump({**base_env(), **production})

    assert with_example["SECURE_HSTS_SECONDS"] == "31536000"  # production settings were read
    assert differences(with_example, without) == {}


def test_a_changed_default_is_noticed():
    """The comparison above does see a value that differs from the code's default."""
    changed = {**example(), "INGESTION_DEDUP_DAYS": "7", "INGESTION_DRAIN_BATCH": "40000"}
    found = differences(dump({**base_env(), **changed}), dump(base_env()))

    assert set(found) == {"INGESTION_DEDUP_DAYS", "INGESTION_DRAIN_BATCH"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_manage_py_check_passes_on_the_example_as_is():
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**base_env(), **example()},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.e2e
def test_the_service_answers_healthz_on_the_example_as_is():
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "config.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        env={**base_env(), **example()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body = get(f"http://127.0.0.1:{port}/healthz")
                break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None, server.stderr.read().decode()
                assert time.monotonic() < deadline, "the server did not answer in 30 s"
                time.sleep(0.2)
        assert (status, json.loads(body)) == (
            200,
            {"status": "ok", "database": "ok", "broker": "ok"},
        )
        # The project's files are not static files.
        assert get(f"http://127.0.0.1:{port}/static/.env.example")[0] == 404
        assert get(f"http://127.0.0.1:{port}/static/manage.py")[0] == 404
    finally:
        server.terminate()
        server.wait(timeout=10)
