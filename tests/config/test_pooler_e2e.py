"""Behind PgBouncer in transaction mode (docs/deployment.md): the service in production mode, its
web server, worker and scheduler all connected through a real PgBouncer this test starts
(`pool_mode = transaction`, Debian's 1.18: no prepared statements), does everything it does
directly: the door, the drain of single calls and of a batch, an alias, scoring, history, the
read API, an erasure, an automation's delivery, a marketplace sync and the dashboard. Nothing
errs on the way, in PgBouncer's log or in the processes' own output.

The other production-mode end-to-end tests run through a pooler too when TEST_POOLER_URL is set
(`.ci/run` sets it: tests/processes.production_env).
"""

import csv
import io
import json
import os
import signal
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model

from automations.models import Delivery
from bench.pgbouncer import pgbouncer
from engagement.models import Account, Event, ProductMembership, User
from marketplace.fake import FakeMarketplace
from marketplace.models import SyncRun
from readapi.services import api_token_create
from tests.automations.receiver import Receiver
from tests.config.test_database_restart import _session_cookie
from tests.conftest import make_tenant
from tests.marketplace.conftest import EMAIL, TOKEN, VENDOR_ID
from tests.processes import ROOT, free_port, http, production_env, wait_for, web_command

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

# What the service's processes print when something went wrong (their log level is WARNING).
_TROUBLE = ("Traceback", "ERROR", "prepared statement", "does not exist", "transaction mode")


def _spawn(args: list[str], env: dict, log) -> subprocess.Popen:
    return subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def manage(env: dict, *args: str) -> str:
    """A manage.py command as an operator runs it, with the processes' environment."""
    return subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout


def _get(url: str, headers: dict) -> tuple[int, dict]:
    status, body = http("GET", url, headers=headers)
    return status, json.loads(body) if body[:1] in (b"{", b"[") else {}


def test_everything_through_pgbouncer_in_transaction_mode(broker, tmp_path, settings):
    acme = make_tenant("Acme")
    _, deleter = api_token_create(product_id=acme.product.id, name="eraser", scopes=["delete"])
    read = {"Authorization": acme.bearer}
    erase = {"Authorization": f"Bearer {deleter}"}
    manager = get_user_model().objects.create_user("mona", "mona@example.com", "x" * 20)
    ProductMembership.objects.create(
        user=manager, product=acme.product, role=ProductMembership.Role.MANAGER
    )
    receiver = Receiver().start()
    marketplace = FakeMarketplace(licenses=60, email=EMAIL, token=TOKEN, vendor_id=VENDOR_ID)
    marketplace_url = marketplace.start()
    db = settings.DATABASES["default"]
    user = db["USER"] or "postgres"
    with pgbouncer(
        port=free_port(),
        server_host=db["HOST"] or "127.0.0.1",
        server_port=int(db["PORT"] or 5432),
        users=(user,),
    ) as bouncer:
        env = production_env(settings.CELERY_BROKER_URL, tmp_path)
        env.update(
            DATABASE_URL=bouncer.url(db["NAME"], user),
            SCORING_REFRESH_SECONDS="1",
            MARKETPLACE_API_URL=marketplace_url,
            AUTOMATION_ALLOW_PRIVATE_URLS="true",
            LOG_LEVEL="WARNING",
        )
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        logs = {name: (tmp_path / f"{name}.log").open("wb") for name in ("web", "worker", "beat")}
        processes = [
            _spawn(
                web_command(port, workers=2),
                env,
                logs["web"],
            ),
            _spawn(
                [
                    "celery",
                    "-A",
                    "config",
                    "worker",
                    "--concurrency",
                    "2",
                    "--loglevel",
                    "WARNING",
                    "--queues",
                    "celery,marketplace,automations",
                    "--without-gossip",
                    "--without-mingle",
                ],
                env,
                logs["worker"],
            ),
            _spawn(
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
                logs["beat"],
            ),
        ]
        try:
            wait_for(lambda: http("GET", f"{base}/healthz")[0] == 200, timeout=60)
            door = {"Authorization": acme.basic, "Content-Type": "application/json"}

            def post(path: str, body: dict) -> int:
                return http("POST", f"{base}{path}", body, door)[0]

            # The door, single calls (each drained on its own) ...
            assert post("/v2/identify", {"userId": "ann", "traits": {"email": "ann@a.test"}}) == 202
            assert post("/v2/group", {"userId": "ann", "groupId": "acme-co"}) == 202
            for _ in range(3):
                assert post("/v2/track", {"userId": "ann", "event": "Report_Created"}) == 202
            wait_for(lambda: Event.objects.filter(user__tracking_id="ann").count() == 3)
            # ... and a Segment batch, with an alias that merges bob-old (its event) into bob.
            batch = {
                "batch": [
                    {
                        "type": "track",
                        "userId": "bob-old",
                        "event": "Page_Viewed",
                        "messageId": "m1",
                    },
                    {
                        "type": "identify",
                        "userId": "bob",
                        "traits": {"name": "Bob"},
                        "messageId": "m2",
                    },
                    {"type": "group", "userId": "bob", "groupId": "acme-co", "messageId": "m3"},
                    {
                        "type": "track",
                        "userId": "bob",
                        "event": "Report_Created",
                        "messageId": "m4",
                    },
                    {
                        "type": "alias",
                        "userId": "bob",
                        "previousId": "bob-old",
                        "messageId": "m5",
                    },
                ]
            }
            status, body = http("POST", f"{base}/v1/batch", batch, door)
            assert (status, json.loads(body)["success"]) == (200, True)
            wait_for(
                lambda: (
                    Event.objects.filter(product=acme.product, user__tracking_id="bob").count() == 2
                )
            )
            assert not User.objects.filter(product=acme.product, tracking_id="bob-old").exists()

            # Scoring (beat asks every second), the read API and history.
            account = Account.objects.get(product=acme.product, tracking_id="acme-co")
            ws = acme.workspace.id
            accounts_url = f"{base}/v2/accounts?workspace_id={ws}"

            def scored() -> bool:
                status, page = _get(accounts_url, read)
                return status == 200 and any(
                    a["id"] == account.id and a["engagement_score"] for a in page["data"]
                )

            wait_for(scored, timeout=60)
            status, history = _get(
                f"{base}/v2/accounts/{account.id}/history?workspace_id={ws}&days=7", read
            )
            assert status == 200 and history["data"][-1]["engagement_score"] > 0
            ann = User.objects.get(product=acme.product, tracking_id="ann")
            status, record = _get(f"{base}/v2/users/{ann.id}?workspace_id={ws}", read)
            assert status == 200 and record["engagement_score"] > 0

            # An automation (made by manage.py, through the pooler too: its URL is encrypted
            # with the production settings' key) fires for an account new since the last
            # refresh; the automations queue's worker delivers it.
            manage(
                env,
                "automation_create",
                "--workspace",
                str(ws),
                "--trigger",
                "new_account",
                "--url",
                receiver.url,
                "--json",
            )
            assert post("/v2/group", {"userId": "ann", "groupId": "initech"}) == 202
            wait_for(lambda: Delivery.objects.filter(status="delivered").count() == 1, timeout=60)
            assert receiver.requests[0].json()["data"]["account"]["tracking_id"] == "initech"

            # A marketplace connection (manage.py checks it over HTTP, queues a full sync); the
            # marketplace queue's worker runs the sync.
            manage(
                env,
                "marketplace_connect",
                "--product",
                str(acme.product.id),
                "--email",
                EMAIL,
                "--token",
                TOKEN,
                "--vendor-id",
                VENDOR_ID,
                "--app-name",
                marketplace.apps[0]["appName"],
            )
            wait_for(lambda: SyncRun.objects.filter(outcome="succeeded").exists(), timeout=60)
            run = SyncRun.objects.get()
            cloud_ids = {r["cloudId"] for r in marketplace.licenses if r.get("cloudId")}
            assert run.licenses_seen == len(marketplace.licenses) and run.accounts_created > 0
            assert (
                Account.objects.filter(product=acme.product, tracking_id__in=cloud_ids).count()
                == run.accounts_created
            )

            # The dashboard: the overview, the account's page and the CSV export.
            signed_in = {"Cookie": _session_cookie(manager, env["SECRET_KEY"])}
            for path in (f"/w/{ws}/", f"/w/{ws}/accounts/", f"/w/{ws}/accounts/{account.id}/"):
                assert http("GET", f"{base}{path}", headers=signed_in)[0] == 200, path
            status, exported = http("GET", f"{base}/w/{ws}/accounts.csv", headers=signed_in)
            rows = list(csv.DictReader(io.StringIO(exported.decode())))
            assert status == 200 and "acme-co" in {row["tracking_id"] for row in rows}

            # An erasure, by the worker.
            status, body = http("DELETE", f"{base}/v2/users/{ann.id}", headers=erase)
            assert status == 202
            receipt = json.loads(body)["_links"]["self"]
            wait_for(lambda: _get(f"{base}{receipt}", erase)[1].get("status") == "completed")
            assert not User.objects.filter(id=ann.id).exists()
        finally:
            # The main processes only: each stops its own children (a celery pool child sent
            # SIGTERM itself is reported as lost).
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=10)
            for log in logs.values():
                log.close()
            receiver.stop()
            marketplace.stop()
        # Every process went through the pooler, and nothing went wrong there or in them.
        assert f"db={db['NAME']}" in bouncer.log_text()
        assert bouncer.errors() == []
        for name in logs:
            output = (tmp_path / f"{name}.log").read_text(errors="replace")
            assert not [line for line in output.splitlines() if any(t in line for t in _TROUBLE)]
