"""A prefork worker's processes keep their PostgreSQL sessions from task to task
(config/celery_fixup.py); the main process still closes its pool before its children fork."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.db import connection

from config.celery import app
from config.celery_fixup import PooledDjangoFixup, PooledWorkerFixup

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgresql]

A_TASK = SimpleNamespace(request=SimpleNamespace(is_eager=False))


def session_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


@pytest.fixture
def prefork_fixup() -> PooledWorkerFixup:
    fixup = PooledWorkerFixup(app)
    fixup.worker = SimpleNamespace(pool_cls="celery.concurrency.prefork:TaskPool")
    return fixup


def test_the_worker_app_installs_the_pooled_fixup():
    assert [type(installed) for installed in app._fixups] == [PooledDjangoFixup]
    assert isinstance(app._fixups[0].worker_fixup, PooledWorkerFixup)


def test_a_forked_process_opens_no_session_from_task_to_task(prefork_fixup):
    prefork_fixup._main_pid = -1  # as in a child the main process forked
    session_pid()
    pool = connection.pool
    opened = pool.get_stats().get("connections_num", 0)

    for _ in range(3):
        prefork_fixup.on_task_prerun(sender=A_TASK)
        session_pid()
        prefork_fixup.on_task_postrun(sender=A_TASK)

    assert connection.pool is pool
    assert not pool.closed
    assert pool.get_stats().get("connections_num", 0) == opened


def test_the_main_process_closes_its_pool_before_its_children_fork(prefork_fixup):
    session_pid()
    pool = connection.pool

    prefork_fixup.close_database()

    assert pool.closed
    session_pid()  # a new pool, opened on first use
    assert connection.pool is not pool
