"""Celery's Django fix-up, keeping each worker process's database connection pool across tasks.

Celery (5.5 and later) closes Django's connection pool before and after every task of a prefork
worker (`celery.fixups.django.DjangoWorkerFixup._close_database`), so that no child inherits a
pool its parent opened. Every task then opened a new PostgreSQL session: under a steady stream,
each drain wake-up and score refresh, 7 new sessions a second at 120 messages a second, about
0.15 of a core and 15-20% of every score's wait (docs/benchmarks.md, 2026-11-28).

Here the main process still closes its pool, as before its children fork (and it runs no task
of its own, but under the solo pool, where it closes as Celery does). A child gives its
connections back to its own pool after each task instead: Django checks a pooled connection
when it is taken again (CONN_HEALTH_CHECKS), and replaces one the database dropped, as the web
processes' pools do.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

# celery-types does not declare DjangoWorkerFixup.
from celery.fixups.django import (  # type: ignore[attr-defined]
    DjangoFixup,
    DjangoWorkerFixup,
)


class PooledWorkerFixup(DjangoWorkerFixup):
    """Closes the pool in the process it was made in (the main one); in a forked child, only
    gives the connections back to the child's pool."""

    def __init__(self, app: Celery) -> None:
        super().__init__(app)
        self._main_pid = os.getpid()

    def _close_database(self) -> None:
        if os.getpid() == self._main_pid:
            super()._close_database()
            return
        for conn in self._db.connections.all(initialized_only=True):
            try:
                conn.close()
            except self.interface_errors:
                pass
            except self.DatabaseError as error:
                if "closed" not in str(error) and "not connected" not in str(error):
                    raise


class PooledDjangoFixup(DjangoFixup):
    """Celery's DjangoFixup, whose worker fix-up is a PooledWorkerFixup."""

    _worker_fixup: DjangoWorkerFixup | None

    @property
    def worker_fixup(self) -> DjangoWorkerFixup:
        if self._worker_fixup is None:
            self._worker_fixup = PooledWorkerFixup(self.app)
        return self._worker_fixup

    @worker_fixup.setter
    def worker_fixup(self, value: DjangoWorkerFixup) -> None:
        self._worker_fixup = value


def fixup(app: Celery, env: str = "DJANGO_SETTINGS_MODULE") -> Any:
    """Installed in place of Celery's own Django fix-up (config.celery), on the same terms."""
    if os.environ.get(env) and "django" not in str(app.loader_cls or "").lower():
        return PooledDjangoFixup(app).install()
    return None
