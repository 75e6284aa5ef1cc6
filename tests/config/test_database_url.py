"""DATABASE_URL and DATABASE_REPLICA_URL: one host as before, or libpq's list of hosts for a
primary and its standbys; a URL that cannot be read stops the process with a clear error."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from config.database import databases_from_env
from tests.config.test_settings import PRODUCTION, ROOT, load_settings
from tests.processes import database_url

MULTI_HOST = (
    "postgres://eds:p%40ss@db1.example:5432,db2.example:5433/eds"
    "?target_session_attrs=read-write&sslmode=require"
)


def _default(url: str, replica_url: str = "") -> dict:
    databases, _ = databases_from_env(
        database_url=url, replica_url=replica_url, production=True, data_dir=Path("/nonexistent")
    )
    return databases


def test_a_multi_host_url_gives_django_libpq_lists_of_hosts_and_ports():
    default = _default(MULTI_HOST)["default"]

    assert default["ENGINE"] == "django.db.backends.postgresql"
    assert (default["HOST"], default["PORT"]) == ("db1.example,db2.example", "5432,5433")
    assert (default["USER"], default["PASSWORD"], default["NAME"]) == ("eds", "p@ss", "eds")
    assert default["OPTIONS"]["target_session_attrs"] == "read-write"
    assert default["OPTIONS"]["sslmode"] == "require"
    assert default["OPTIONS"]["pool"]["timeout"] == 3
    assert default["CONN_HEALTH_CHECKS"] is True


def test_hosts_without_ports_and_an_ipv6_address():
    default = _default("postgres://eds@[::1]:6432,db2.example/eds")["default"]

    assert (default["HOST"], default["PORT"]) == ("::1,db2.example", "6432,")
    assert (_default("postgres://eds@db1,db2/eds")["default"]["PORT"]) == ""


def test_a_single_host_url_reads_as_it_always_did():
    default = _default("postgres://eds:secret@db.example:5432/eds?sslmode=verify-full")["default"]

    assert (default["HOST"], default["PORT"], default["PASSWORD"]) == ("db.example", 5432, "secret")
    assert default["OPTIONS"]["sslmode"] == "verify-full"
    assert default["OPTIONS"]["pool"]["max_size"] >= 1


def test_a_vanished_server_is_given_up_in_seconds_unless_the_url_says_otherwise():
    options = _default("postgres://eds@db1,db2/eds")["default"]["OPTIONS"]
    assert options["connect_timeout"] == 5
    assert (options["keepalives_idle"], options["keepalives_count"]) == (10, 3)
    assert options["tcp_user_timeout"] == 25_000

    own = _default("postgres://eds@db/eds?connect_timeout=20")["default"]["OPTIONS"]
    assert own["connect_timeout"] == 20


def test_the_replica_url_takes_several_hosts_too():
    replica = _default(
        MULTI_HOST, "postgres://eds@r1.example,r2.example/eds?target_session_attrs=prefer-standby"
    )["replica"]

    assert replica["HOST"] == "r1.example,r2.example"
    assert replica["OPTIONS"]["target_session_attrs"] == "prefer-standby"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("postgres://eds:hunter2@db1:54x2,db2/eds", "port '54x2' is not a number"),
        ("postgres://eds:hunter2@db1,,db2/eds", "a host of the list is empty"),
        ("postgres://eds:hunter2@db1:99999,db2/eds", "port '99999' is not a number"),
        ("mysql://eds:hunter2@db1,db2/eds", "several hosts are for PostgreSQL only"),
        ("postgres://eds:hunter2@db1:port/eds", "not a valid url"),
        ("postgress://eds:hunter2@db1/eds", "Scheme 'postgress://' is unknown"),
    ],
)
def test_a_url_that_cannot_be_read_is_refused_without_showing_the_password(url, reason):
    with pytest.raises(ImproperlyConfigured) as refused:
        _default(url)

    message = str(refused.value)
    assert message.startswith("DATABASE_URL is not a valid database URL")
    assert reason in message
    assert "hunter2" not in message


def test_a_bad_replica_url_is_named_as_such():
    with pytest.raises(ImproperlyConfigured, match="^DATABASE_REPLICA_URL is not a valid"):
        _default(MULTI_HOST, "postgres://eds@r1,,r2/eds")


def test_a_process_with_a_bad_url_stops_at_start_with_the_reason():
    result = load_settings({**PRODUCTION, "DATABASE_URL": "postgres://eds:hunter2@db1:x,db2/eds"})

    assert result.returncode != 0
    assert "ImproperlyConfigured: DATABASE_URL is not a valid database URL" in result.stderr
    assert "hunter2" not in result.stderr


def test_the_test_helper_writes_the_url_back():
    db = {"USER": "eds", "PASSWORD": "p@ss", "HOST": "db1,::1", "PORT": "5432,", "NAME": "eds"}

    assert database_url(db) == "postgres://eds:p%40ss@db1:5432,[::1]/eds"
    assert _default(database_url(db))["default"]["HOST"] == "db1,::1"


@pytest.mark.postgresql
def test_a_manage_py_command_connects_through_the_first_host_that_answers(transactional_db):
    """A refused first host (a stopped primary), then this machine's server: the command runs
    on the second, as every process would after a failover."""
    db = connection.settings_dict
    hosts = {**db, "HOST": f"127.0.0.1,{db['HOST'] or '127.0.0.1'}", "PORT": f"1,{db['PORT']}"}
    env = {
        **os.environ,
        "DATABASE_URL": database_url(hosts) + "?target_session_attrs=read-write",
    }
    result = subprocess.run(  # noqa: S603
        [
            sys.executable,
            "manage.py",
            "shell",
            "-v",
            "0",
            "-c",
            "from django.db import connection; connection.ensure_connection();"
            "print(connection.connection.info.port)",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(db["PORT"] or 5432)]
