"""Backed up and restored (docs/deployment.md, "Backup and restore"): a pg_dump of a running
installation, with requests accepted and not yet applied, restored with pg_restore into a new
database under new processes, answers the read API and shows the dashboard overview as the
installation did at the dump; the backlog, which lives in the database, is applied after the
restore exactly once, and the scores come out as the original's once it applies the same
backlog. Real processes (uvicorn, a Celery worker, the beat), real pg_dump and pg_restore of the
test server; the restored database is dropped at the end."""

import shutil
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from engagement.models import Event, ProductMembership
from ingestion.models import AcceptedRequest
from tests.config.test_database_restart import _session_cookie
from tests.conftest import make_tenant
from tests.installations import (
    ROOT,
    SECRET_KEY,
    Installation,
    differences,
    overview_figures,
    post,
    query,
    read_api_answers,
    server_admin,
    settled,
    without,
)
from tests.processes import http

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]
BACKLOG = 50
EVENTS = ("Report_Created", "Dashboard_Viewed", "Alert_Set")


def _populate(base: str, key: str) -> None:
    """Nine people in three accounts, each more active than the last, through the door."""
    now = datetime.now(UTC)
    batch = []
    for n in range(9):
        user, account = f"user-{n}", f"account-{n % 3}"
        batch.append({"type": "identify", "userId": user, "traits": {"name": f"User {n}"}})
        batch.append(
            {"type": "group", "userId": user, "groupId": account, "traits": {"name": account}}
        )
        for m in range(3 * n + 1):
            when = now - timedelta(days=m % 6, minutes=m)
            batch.append(
                {
                    "type": "track",
                    "userId": user,
                    "event": EVENTS[m % 3],
                    "timestamp": when.isoformat(),
                    "context": {"groupId": account},
                }
            )
    status, body = http(
        "POST",
        f"{base}/v1/batch",
        {"batch": batch},
        {"Authorization": f"Basic {key}", "Content-Type": "application/json"},
    )
    assert (status, b'"rejected"' in body) == (200, False), body


def _scored(answers: dict) -> bool:
    records = [a for path, a in answers.items() if "?" in path and "/v2/segments" not in path]
    return all(record.get("scored_at") for record in records if "data" not in record)


def _moved(answers: dict, before: dict) -> bool:
    """Whether a score refresh has taken in what was applied since `before`."""
    return without(answers, {"scored_at"}) != without(before, {"scored_at"})


@pytest.fixture
def restored_database():
    name = f"{connection.settings_dict['NAME']}_restored"
    admin = server_admin()
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    try:
        yield name
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_a_dump_of_a_running_installation_restores_with_its_backlog(
    broker, restored_database, tmp_path
):
    assert shutil.which("pg_dump") and shutil.which("pg_restore"), "PostgreSQL's client tools"
    acme = make_tenant("Acme")
    manager = get_user_model().objects.create_user("mona", "mona@example.com", "x" * 20)
    ProductMembership.objects.create(
        user=manager, product=acme.product, role=ProductMembership.Role.MANAGER
    )
    # The session lives in the database: the same cookie signs in on the restored installation.
    cookie = _session_cookie(manager, SECRET_KEY)
    workspace = acme.workspace.id
    original_name = connection.settings_dict["NAME"]
    original = Installation(source=ROOT, database=original_name, logs=tmp_path / "original")
    restored = Installation(source=ROOT, database=restored_database, logs=tmp_path / "restored")

    def answers(installation: Installation) -> dict:
        return {
            "read api": read_api_answers(installation.base, acme.token, workspace),
            "overview": overview_figures(installation.base, cookie, workspace),
        }

    try:
        original.start("web", "worker", "beat")
        _populate(original.base, acme.key.key)
        original.wait(lambda: original.backlog() == 0, "the population applied")
        original.wait(lambda: _scored(answers(original)["read api"]), "every record scored")
        settled(lambda: answers(original), "the original's scores")
        # The worker and the beat stop: what is accepted now stays in the acceptance store.
        original.stop("worker", "beat")
        events_before = Event.objects.filter(product=acme.product).count()
        for _ in range(BACKLOG):
            status = post(
                original.base,
                "/v2/track",
                {
                    "userId": "user-0",
                    "event": "Report_Created",
                    "context": {"groupId": "account-0"},
                },
                acme.key.key,
            )
            assert status == 202
        assert AcceptedRequest.objects.exists()
        assert Event.objects.filter(product=acme.product).count() == events_before
        at_dump = answers(original)

        # The backup, taken while the web server serves.
        dump = tmp_path / "eds.dump"
        subprocess.run(  # noqa: S603
            ["pg_dump", "--format=custom", f"--file={dump}", *_connection_args(original_name)],
            check=True,
        )
        original.stop()

        # The restore: a new database, new processes, a broker that never saw the old one.
        subprocess.run(  # noqa: S603
            ["createdb", *_connection_args(restored_database)], check=True
        )
        subprocess.run(  # noqa: S603
            [
                "pg_restore",
                "--exit-on-error",
                "--no-owner",
                "--dbname",
                restored_database,
                *_connection_args(None),
                str(dump),
            ],
            check=True,
        )
        broker.flushdb()
        restored.start("web")
        assert differences(answers(restored), at_dump) == []
        assert restored.backlog() > 0

        restored.start("worker", "beat")
        restored.wait(lambda: restored.backlog() == 0, "the backlog applied after the restore")
        applied = query(
            restored_database,
            "SELECT count(*) FROM engagement_event e JOIN engagement_user u ON u.id = e.user_id"
            " WHERE u.tracking_id = 'user-0' AND e.product_id = %s",
            (acme.product.id,),
        )[0][0]
        before = Event.objects.filter(product=acme.product, user__tracking_id="user-0").count()
        assert applied == before + BACKLOG  # each accepted request applied once
        assert query(restored_database, "SELECT count(*) FROM ingestion_droppedrequest") == [(0,)]
        restored.wait(lambda: _moved(answers(restored), at_dump), "the backlog scored")
        restored_after = settled(lambda: answers(restored), "the restored scores")
        restored.stop()

        # The original applies the same backlog itself: the same scores and figures.
        broker.flushdb()
        original.start("web", "worker", "beat")
        original.wait(lambda: original.backlog() == 0, "the original's backlog applied")
        original.wait(lambda: _moved(answers(original), at_dump), "the original's backlog scored")
        original_after = settled(lambda: answers(original), "the original's scores")
        times = {"scored_at", "joined_at"}  # when each installation refreshed
        assert (
            differences(
                without(restored_after["read api"], times),
                without(original_after["read api"], times),
            )
            == []
        )
        assert restored_after["overview"] == original_after["overview"]
    finally:
        original.stop()
        restored.stop()


def _connection_args(database: str | None) -> list[str]:
    db = connection.settings_dict
    args = [
        f"--host={db['HOST'] or '127.0.0.1'}",
        f"--port={db['PORT'] or 5432}",
        f"--username={db['USER'] or 'postgres'}",
    ]
    return [*args, database] if database else args
