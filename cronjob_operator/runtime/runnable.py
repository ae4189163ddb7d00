"""Runnables: everything the manager runs, started and stopped one way.

As controller-runtime's ``manager.Runnable``: ``run(stop)`` blocks until ``stop`` is set,
then cleans up and returns; the manager runs each on a thread of its own. A runnable
says whether it needs the lease (``needs_leader_election``): controllers do, so they run
only on the leader, after the caches have synced; the cache, the event recorder, the
probe, metrics and webhook servers do not, so followers keep a warm cache and answer
probes and admission requests. On shutdown the manager stops the leader runnables
first (they drain in-flight work), then releases the lease, then stops the others in
the reverse of the order they were added.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

__all__ = ["Runnable", "run_between"]


class Runnable(Protocol):
    """Something the manager runs until it stops."""

    @property
    def needs_leader_election(self) -> bool:
        """True when it may run only while this process holds the lease."""
        ...

    def run(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set, then clean up and return; an exception is logged."""
        ...


def run_between(stop: threading.Event, start: Callable[[], None], halt: Callable[[], None]) -> None:
    """``run`` for a service with a non-blocking ``start`` and a cleaning-up ``halt``."""
    start()
    stop.wait()
    halt()
