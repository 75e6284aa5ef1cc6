"""Primary failovers, as Patroni or a managed service makes them: the service runs on a primary
and its synchronous hot standby (two PostgreSQL servers of this machine's binaries, in a
temporary directory) through libpq's multi-host DATABASE_URL. Under steady ingestion and reads,
twice: the primary crashes (`pg_ctl stop -m immediate`) and the standby is promoted; then, the
old primary having rejoined as the new one's synchronous standby, that standby is promoted while
the old primary still runs, reachable, every commit on it waiting for the standby it no longer
has, until it crashes too. The web server (uvicorn, as the README starts it), a Celery worker and
beat are never restarted.

What a client sees: 202 or 503 with Retry-After from the door, 200 or 503 with Retry-After from
the read API, nothing else and no answer slower than the door's deadline; every request
answered 202 before, during and after is applied exactly once, on the new primary, and scoring
goes on there. The counts and times are printed (`-s`) and written to FAILOVER_REPORT (a JSON
file, one entry per failover) when it is set."""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from bench.pg_clusters import Cluster, primary_and_replica
from ingestion.writer import WRITE_DEADLINE_SECONDS
from tests.processes import ROOT, free_port, production_env, wait_for, web_command

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]

SENDERS = 4
SEND_EVERY_SECONDS = 0.025  # each sender: about 160 requests a second in all
CLIENT_TIMEOUT_SECONDS = 10  # an SDK's: a request not answered by then counts as hung
BEFORE_SECONDS = 3.0
CRASH_FIRST = "the primary crashes, then the standby is promoted"
PROMOTED_FIRST = "the standby is promoted, then the old primary crashes"
# Patroni notices a dead primary after its TTL (30 s by default); here 4 s stand for it, longer
# than the pool waits for a connection (3 s), so that the read API's 503 shows too.
DETECTION_SECONDS = 4.0
# Promoted first: how long the old primary goes on; a request stuck on it without the door's
# deadline would take this long, over SLOWEST_ANSWER_SECONDS.
OLD_PRIMARY_SECONDS = WRITE_DEADLINE_SECONDS + 3
AFTER_SECONDS = 3.0  # of 202s after the first one on the new primary
# The slowest answer allowed: the door's deadline, and some slack for a loaded machine.
SLOWEST_ANSWER_SECONDS = WRITE_DEADLINE_SECONDS + 1.5


@dataclass
class Answer:
    path: str
    user: str
    sent_at: float
    answered_at: float
    status: int | None  # None: no answer (refused, reset, timed out)
    retry_after: str | None


class Senders:
    """Threads that each send a track of a user of its own every SEND_EVERY_SECONDS, and one
    that reads the read API's users as often, each on a keep-alive connection (reopened when
    lost); every answer is kept."""

    def __init__(self, port: int, tenant: dict, phase: str) -> None:
        self.port = port
        self.tenant = tenant
        self.phase = phase  # in each user's id, unique across the test
        self.answers: list[Answer] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._send, args=(n,)) for n in range(SENDERS)]
        self._threads.append(threading.Thread(target=self._send, args=(None,)))

    def __enter__(self) -> "Senders":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=CLIENT_TIMEOUT_SECONDS + 5)

    def _send(self, sender: int | None) -> None:
        """Tracks as `sender`; None: reads."""
        connection = None
        count = 0
        while not self._stop.is_set():
            count += 1
            user = f"{self.phase}{sender}-{count}"
            if sender is None:
                method, body = "GET", None
                path = f"/v2/users?workspace_id={self.tenant['workspace_id']}"
                headers = {"Authorization": f"Bearer {self.tenant['api_token']}"}
            else:
                method, path = "POST", "/v2/track"
                body = json.dumps(
                    {"userId": user, "event": "Report_Created", "messageId": str(uuid.uuid4())}
                )
                headers = {
                    "Authorization": f"Basic {self.tenant['ingestion_key']}",
                    "Content-Type": "application/json",
                }
            sent_at = time.monotonic()
            status = retry_after = None
            try:
                if connection is None:
                    connection = http.client.HTTPConnection(
                        "127.0.0.1", self.port, timeout=CLIENT_TIMEOUT_SECONDS
                    )
                connection.request(method, path, body, headers)
                response = connection.getresponse()
                response.read()
                status, retry_after = response.status, response.getheader("Retry-After")
            except (OSError, http.client.HTTPException):
                if connection is not None:
                    connection.close()
                connection = None
            with self._lock:
                self.answers.append(
                    Answer(path, user, sent_at, time.monotonic(), status, retry_after)
                )
            self._stop.wait(SEND_EVERY_SECONDS)
        if connection is not None:
            connection.close()

    def first_202_after(self, moment: float) -> float | None:
        with self._lock:
            times = [a.answered_at for a in self.answers if a.status == 202 and a.sent_at > moment]
        return min(times, default=None)

    def tracks(self) -> list[Answer]:
        return [answer for answer in self.answers if answer.path == "/v2/track"]

    def reads(self) -> list[Answer]:
        return [answer for answer in self.answers if answer.path != "/v2/track"]


def _start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    with log.open("w") as output:
        return subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", *args],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _manage(env: dict, *args: str) -> str:
    result = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _events_per_user(server: Cluster) -> dict[str, int]:
    with psycopg.connect(server.url("eds"), connect_timeout=3) as conn:
        return dict(
            conn.execute(
                "SELECT u.tracking_id, count(*) FROM engagement_event e"
                " JOIN engagement_user u ON u.id = e.user_id GROUP BY u.tracking_id"
            ).fetchall()
        )


def _waiting_requests(server: Cluster) -> int:
    with psycopg.connect(server.url("eds"), connect_timeout=3) as conn:
        return conn.execute("SELECT count(*) FROM ingestion_acceptedrequest").fetchone()[0]


def _dropped_requests(server: Cluster) -> int:
    with psycopg.connect(server.url("eds"), connect_timeout=3) as conn:
        return conn.execute("SELECT count(*) FROM ingestion_droppedrequest").fetchone()[0]


def _scoring(server: Cluster) -> tuple[datetime | None, int, int]:
    """When the workspace was last scored, the users scored then, and the users there are."""
    with psycopg.connect(server.url("eds"), connect_timeout=3) as conn:
        refreshed_at, scored = conn.execute(
            "SELECT max(refreshed_at), coalesce(max(scored_users), 0) FROM engagement_scoringstate"
        ).fetchone()
        (users,) = conn.execute("SELECT count(*) FROM engagement_user").fetchone()
    return refreshed_at, scored, users


def test_every_process_goes_through_two_primary_failovers(broker, tmp_path):
    # The primary waits for its standby to have every commit on disk before the commit returns
    # (what Patroni's synchronous_mode sets): only so is a 202 kept when the primary dies.
    sync = {"synchronous_standby_names": "*", "synchronous_commit": "on"}
    with primary_and_replica(ports=(free_port(), free_port()), primary_settings=sync) as (
        first,
        second,
    ):
        with psycopg.connect(first.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE eds")
        env = production_env(settings.CELERY_BROKER_URL, tmp_path)
        env["DATABASE_URL"] = (
            f"postgres://postgres@127.0.0.1:{first.port},127.0.0.1:{second.port}/eds"
            "?target_session_attrs=read-write"
        )
        env["SCORING_REFRESH_SECONDS"] = "2"
        # Every manage.py command reads the multi-host URL too.
        _manage(env, "migrate", "--noinput", "-v", "0")
        tenant = json.loads(_manage(env, "create_product", "Acme", "--json"))
        port = free_port()
        web = _start(
            web_command(port, workers=2),
            env,
            tmp_path / "web.log",
        )
        worker = _start(
            ["celery", "-A", "config", "worker", "--concurrency", "2", "--loglevel", "WARNING"],
            env,
            tmp_path / "worker.log",
        )
        beat = _start(
            [
                "celery",
                "-A",
                "config",
                "beat",
                "--loglevel",
                "WARNING",
                "--schedule",
                str(tmp_path / "beat-schedule"),
            ],
            env,
            tmp_path / "beat.log",
        )
        reports = {}
        try:
            wait_for(lambda: _status(port, "/healthz") == 200, timeout=60)
            # The primary, first in the URL, crashes; Patroni promotes the standby.
            reports[CRASH_FIRST] = _fail_over(first, second, port, tenant, CRASH_FIRST, "a")
            # The old primary rejoins as the new one's synchronous standby; the same processes
            # go on. Now the standby is promoted while the old primary still runs (Patroni could
            # not reach it to demote it), until it crashes too.
            first.rebuild_as_standby_of(second)
            _make_synchronous(second)
            reports[PROMOTED_FIRST] = _fail_over(second, first, port, tenant, PROMOTED_FIRST, "b")
            # Nothing of the first failover was lost or repeated in the second.
            stored = _events_per_user(first)
            accepted = set().union(*(report.pop("accepted") for report in reports.values()))
            applied_once_in_the_end = sum(stored.get(user) == 1 for user in accepted)
        finally:
            for process in (beat, worker, web):
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(timeout=30)

    print("\nfailovers:", json.dumps(reports, indent=2))  # noqa: T201 (the figures, with -s)
    if os.environ.get("FAILOVER_REPORT"):
        Path(os.environ["FAILOVER_REPORT"]).write_text(json.dumps(reports, indent=2) + "\n")
    assert applied_once_in_the_end == len(accepted)
    for order, report in reports.items():
        assert report["other_answers"] == report["reads_other_answers"] == 0, (order, report)
        assert report["503_without_retry_after"] == 0, (order, report)
        assert report["slowest_answer_seconds"] < SLOWEST_ANSWER_SECONDS, (order, report)
        assert report["accepted_applied_exactly_once"] == report["202"], (order, report)
        assert report["refused_applied_more_than_once"] == 0, (order, report)
        assert report["waiting_after"] == report["dropped"] == 0, (order, report)
    # Longer without a primary than the pool waits for a connection: the read API said 503.
    assert reports[CRASH_FIRST]["reads_503"] > 0, reports
    # The new primary is found at once, not after a pool's reconnection backoff (1, 2, 4... s).
    assert reports[CRASH_FIRST]["seconds_to_first_202_after_promotion"] < 2, reports


def _make_synchronous(primary: Cluster) -> None:
    """Once its standby streams, the primary waits for it at each commit, as the first did."""
    with psycopg.connect(primary.url("postgres"), autocommit=True) as conn:
        wait_for(
            lambda: conn.execute("SELECT count(*) FROM pg_stat_replication").fetchone()[0] == 1
        )
        conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        conn.execute("SELECT pg_reload_conf()")
        wait_for(
            lambda: (
                conn.execute("SELECT sync_state FROM pg_stat_replication").fetchone()[0] == "sync"
            )
        )


def _fail_over(
    primary: Cluster, standby: Cluster, port: int, tenant: dict, order: str, phase: str
) -> dict:
    with Senders(port, tenant, phase) as senders:
        time.sleep(BEFORE_SECONDS)
        assert senders.first_202_after(0) is not None, "no 202 before the failover"
        if order == CRASH_FIRST:
            crashed_at = time.monotonic()
            primary.stop("immediate")
            time.sleep(DETECTION_SECONDS)
            standby.promote()
            promoted_at, promoted_wall = time.monotonic(), datetime.now(UTC)
        else:
            standby.promote()
            promoted_at, promoted_wall = time.monotonic(), datetime.now(UTC)
            time.sleep(OLD_PRIMARY_SECONDS)
            crashed_at = time.monotonic()
            primary.stop("immediate")
        wait_for(lambda: senders.first_202_after(promoted_at) is not None, timeout=60)
        time.sleep(AFTER_SECONDS)
    answers = senders.tracks()
    reads = senders.reads()
    accepted = {a.user for a in answers if a.status == 202}
    refused = {a.user for a in answers if a.status == 503}
    sent_until = time.monotonic()
    # The worker drains what was accepted on either primary, from the new one.
    wait_for(lambda: accepted <= set(_events_per_user(standby)), timeout=60)
    wait_for(lambda: _waiting_requests(standby) == 0, timeout=30)
    drained_at = time.monotonic()
    stored = _events_per_user(standby)
    # Scoring goes on on the new primary: a refresh since the promotion scores every user.
    wait_for(lambda: _scored_since(standby, promoted_wall), timeout=30)
    scored_at = time.monotonic()
    failed_at = min(crashed_at, promoted_at)
    last_202_before = max(
        (a.answered_at for a in answers if a.status == 202 and a.answered_at < failed_at),
        default=failed_at,
    )
    first_202_after = senders.first_202_after(promoted_at)
    return {
        "accepted": accepted,
        "sent": len(answers),
        "202": len(accepted),
        "503": len(refused),
        "other_answers": sum(a.status not in (202, 503) for a in answers),
        "503_without_retry_after": sum(
            a.status == 503 and not a.retry_after for a in answers + reads
        ),
        "reads": len(reads),
        "reads_200": sum(a.status == 200 for a in reads),
        "reads_503": sum(a.status == 503 for a in reads),
        "reads_other_answers": sum(a.status not in (200, 503) for a in reads),
        "accepted_applied_exactly_once": sum(stored.get(user) == 1 for user in accepted),
        # A 503 whose commit reached the standby before the crash cut the answer off: applied
        # once (a client's retry with the same messageId would not apply it again).
        "refused_applied_once": sum(stored.get(user) == 1 for user in refused),
        "refused_applied_more_than_once": sum(stored.get(user, 0) > 1 for user in refused),
        "waiting_after": _waiting_requests(standby),
        "dropped": _dropped_requests(standby),
        "seconds_without_a_primary": round(max(promoted_at - crashed_at, 0), 2),
        "seconds_the_old_primary_ran_on": round(max(crashed_at - promoted_at, 0), 2),
        "seconds_to_first_202_after_promotion": round(first_202_after - promoted_at, 2),
        "seconds_without_a_202": round(first_202_after - last_202_before, 2),
        "seconds_to_drain_after_sending": round(drained_at - sent_until, 2),
        "seconds_to_score_after_sending": round(scored_at - sent_until, 2),
        "slowest_answer_seconds": round(max(a.answered_at - a.sent_at for a in answers + reads), 2),
    }


def _scored_since(server: Cluster, moment: datetime) -> bool:
    refreshed_at, scored, users = _scoring(server)
    return refreshed_at is not None and refreshed_at > moment and scored == users


def _status(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    finally:
        connection.close()
