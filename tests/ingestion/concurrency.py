"""Two workers' transactions on two threads, the first holding its work uncommitted while the
second starts: what the dedup tests use to show the second waits and then finds ids taken."""

import threading
from collections.abc import Callable

from django.db import connection, transaction


def second_waits_on_first(first: Callable[[], object], second: Callable[[], object]) -> tuple:
    """Run `first` in a transaction on a thread and keep it open; run `second` in a transaction
    on another thread, check it is still waiting half a second later, then let `first` commit.
    Returns both results."""
    first_done = threading.Event()
    first_may_commit = threading.Event()
    results: dict[str, object] = {}

    def worker(name: str, work: Callable[[], object]) -> None:
        try:
            with transaction.atomic():
                results[name] = work()
                if name == "first":
                    first_done.set()
                    assert first_may_commit.wait(10)
        finally:
            connection.close()

    a = threading.Thread(target=worker, args=("first", first))
    a.start()
    assert first_done.wait(10)
    b = threading.Thread(target=worker, args=("second", second))
    b.start()
    b.join(0.5)
    assert b.is_alive(), "the second worker did not wait on the first one's uncommitted work"
    first_may_commit.set()
    a.join(10)
    b.join(10)
    return results["first"], results["second"]
