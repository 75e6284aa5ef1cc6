"""Upgraded in place (docs/deployment.md, "Upgrading in place"): a database built and filled by
the previous release (tests/releases.py: its tree materialised from git, its own `migrate`, its
own door), with requests accepted and not yet applied, is migrated by this code while a load
drives the previous release's door; then the processes are replaced one by one, as operators
roll them. Every request the door answered 202 is applied exactly once, whichever release's
worker applied it, and the read API answers as before for the data nobody touched."""

import json
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from tests.installations import (
    ROOT,
    Installation,
    post,
    query,
    read_api_answers,
    server_admin,
    settled,
)
from tests.processes import http
from tests.releases import materialise, previous_release

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]
BACKLOG = 30
# Fields of a record that only its own data moves (not its score, which the newcomers' activity
# rescales, nor its rank, nor the time of a refresh): the same across the upgrade for the people
# and accounts the load never touched.
KEPT = ("tracking_id", "name", "raw_score", "events_in_window", "last_seen", "total_users")


class DoorLoad(threading.Thread):
    """Tracks sent one after another at the door `target[0]` (switched as web servers are
    replaced), each with a timestamp of its own (ms after `origin`) so that the events stored
    can be matched with the answers: `answers` maps each one to its status (0: no answer)."""

    def __init__(self, target: list[str], key: str) -> None:
        super().__init__(daemon=True)
        self.target = target
        self.key = key
        self.origin = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
        self.answers: dict[int, int] = {}
        self.done = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.done.is_set() and n < 20_000:
            stamp = self.origin + timedelta(milliseconds=n)
            body = {
                "userId": f"load-{n % 10}",
                "event": "Load_Event",
                "timestamp": stamp.isoformat(timespec="milliseconds"),
            }
            try:
                self.answers[n] = post(self.target[0], "/v2/track", body, self.key)
            except OSError:
                self.answers[n] = 0
            n += 1
            time.sleep(0.01)  # some 60 requests a second here: a load, not a benchmark

    def accepted(self) -> set[int]:
        return {n for n, status in self.answers.items() if status == 202}


def _populate(base: str, key: str) -> None:
    now = datetime.now(UTC)
    batch = []
    for n in range(6):
        user, account = f"user-{n}", f"account-{n % 2}"
        batch.append({"type": "identify", "userId": user, "traits": {"name": f"User {n}"}})
        batch.append({"type": "group", "userId": user, "groupId": account, "traits": {}})
        batch += [
            {
                "type": "track",
                "userId": user,
                "event": "Report_Created",
                "timestamp": (now - timedelta(days=m % 4, minutes=m)).isoformat(),
                "context": {"groupId": account},
            }
            for m in range(2 * n + 1)
        ]
    status, body = http(
        "POST",
        f"{base}/v1/batch",
        {"batch": batch},
        {"Authorization": f"Basic {key}", "Content-Type": "application/json"},
    )
    assert (status, b'"rejected"' in body) == (200, False), body


def _kept(answers: dict) -> dict:
    """The untouched people's and accounts' figures, by tracking id."""
    kept = {}
    for path, answer in answers.items():
        if "/v2/segments" in path or "data" in answer:
            continue
        if answer["tracking_id"].startswith(("user-", "account-")):
            kept[answer["tracking_id"]] = {field: answer.get(field) for field in KEPT}
    return kept


@pytest.fixture
def upgrade_database():
    name = f"{connection.settings_dict['NAME']}_upgrade"
    admin = server_admin()
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_an_upgrade_under_load_applies_every_accepted_request_once(
    broker, upgrade_database, tmp_path
):
    release = previous_release()
    old_tree = materialise(release, tmp_path / "previous")
    old = Installation(source=old_tree, database=upgrade_database, logs=tmp_path / "old")
    new = Installation(source=ROOT, database=upgrade_database, logs=tmp_path / "new")
    built = old.manage("migrate", "--noinput", "-v0")
    assert built.returncode == 0, built.stderr
    created = old.manage("create_product", "Acme", "--json")
    assert created.returncode == 0, created.stderr
    tenant = json.loads(created.stdout)
    key, token, workspace = tenant["ingestion_key"], tenant["api_token"], tenant["workspace_id"]
    target = [old.base]
    load = DoorLoad(target, key)

    def users_scored() -> bool:
        answers = read_api_answers(target[0], token, workspace)
        return len(_kept(answers)) == 8 and all(
            a.get("scored_at") for a in answers.values() if "tracking_id" in a
        )

    try:
        old.start("web", "worker", "beat")
        _populate(old.base, key)
        old.wait(lambda: old.backlog() == 0, "the previous release applying the population")
        old.wait(users_scored, "the previous release scoring")
        before = settled(
            lambda: _kept(read_api_answers(old.base, token, workspace)), "the previous scores"
        )

        # Accepted and not yet applied when the upgrade starts.
        old.stop("worker")
        for n in range(BACKLOG):
            body = {"userId": "backlog", "event": "Backlog_Event", "timestamp": _ms(n)}
            assert post(old.base, "/v2/track", body, key) == 202
        assert old.backlog() > 0

        # The upgrade, under load: migrate with the new code while the old door serves...
        load.start()
        time.sleep(2)
        migrated = new.manage("migrate", "--noinput", "-v1")
        assert migrated.returncode == 0, migrated.stdout + migrated.stderr
        # ...the previous release's worker applies on the new schema...
        old.start("worker")
        time.sleep(3)
        # ...then each process is replaced by the new release's, one by one.
        new.start("worker")
        old.stop("worker")
        new.start("beat")
        old.stop("beat")
        new.start("web")
        target[0] = new.base
        time.sleep(1)
        old.stop("web")
        time.sleep(2)
        load.done.set()
        load.join(timeout=30)

        new.wait(lambda: new.backlog() == 0, "the new release applying what is left")
        stored = dict(
            query(
                upgrade_database,
                "SELECT (extract(epoch FROM timestamp) * 1000)::bigint, count(*)"
                " FROM engagement_event WHERE name = 'Load_Event' GROUP BY 1",
            )
        )
        origin = int(load.origin.timestamp() * 1000)
        applied = {stamp - origin: count for stamp, count in stored.items()}
        accepted = load.accepted()
        statuses = sorted(set(load.answers.values()))
        # The door accepted throughout: through the migration and the switch of web servers.
        assert statuses == [202] and len(accepted) > 100, statuses
        assert accepted <= set(applied), f"{len(accepted - set(applied))} 202s never applied"
        assert set(applied) <= set(load.answers)
        assert set(applied.values()) == {1}, "a request applied more than once"
        backlog_applied = query(
            upgrade_database,
            "SELECT count(*) FROM engagement_event WHERE name = 'Backlog_Event'",
        )[0][0]
        assert backlog_applied == BACKLOG
        assert query(upgrade_database, "SELECT count(*) FROM ingestion_droppedrequest") == [(0,)]

        # The new release's read API, on what the previous release stored.
        new.wait(users_scored, "the new release scoring")
        assert _kept(read_api_answers(new.base, token, workspace)) == before
    finally:
        load.done.set()
        old.stop()
        new.stop()


def _ms(n: int) -> str:
    stamp = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3, milliseconds=-n)
    return stamp.isoformat(timespec="milliseconds")
