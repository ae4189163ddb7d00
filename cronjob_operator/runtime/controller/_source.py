"""Sources: where a controller's events come from, so a watch takes no private type.

controller-runtime's ``source`` package. A ``Source`` is anything a handler can be
added to and that can say whether it has synced; ``Controller.watch`` takes one.

* ``KindSource(cache, kind)`` is a kind's shared informer in a cache (``For``, ``Owns``
  and ``Watches`` are built on it). The informer is looked up only when the controller
  starts, so declaring a watch creates nothing.
* ``ChannelSource()`` is fed by the application: ``send(obj)`` hands ``obj`` to every
  handler as an add event (controller-runtime's ``source.Channel`` of generic events),
  so predicates see it through ``create``. It is synced from the start. Handlers run on
  the sending thread; the controller's handler only maps and enqueues, so a send is
  cheap and never waits for a reconcile.
"""

from __future__ import annotations

import threading
from typing import Protocol

from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache import Cache, EventHandler
from cronjob_operator.runtime.kinds import Kind


class Source(Protocol):
    """What a controller watches: it takes handlers and knows when it has synced."""

    def add_handler(self, handler: EventHandler) -> None:
        """Deliver every later event (and, for a cache, every object already there)."""
        ...

    @property
    def has_synced(self) -> bool:
        """True once the source has delivered what existed when it started."""
        ...


class KindSource:
    """The events of ``kind``'s shared informer in ``cache``."""

    def __init__(self, cache: Cache, kind: Kind) -> None:
        self.cache = cache
        self.kind = kind

    def add_handler(self, handler: EventHandler) -> None:
        self.cache.informer(self.kind).add_handler(handler)

    @property
    def has_synced(self) -> bool:
        return self.cache.informer(self.kind).has_synced

    def __repr__(self) -> str:
        return f"KindSource({self.kind})"


class ChannelSource:
    """Objects the application sends, delivered to every handler as add events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handlers: tuple[EventHandler, ...] = ()

    def add_handler(self, handler: EventHandler) -> None:
        with self._lock:
            self._handlers = (*self._handlers, handler)

    @property
    def has_synced(self) -> bool:
        return True

    def send(self, obj: objects.Obj) -> None:
        """Hand ``obj`` to every handler added so far (none yet: the object is dropped)."""
        for handler in self._handlers:
            handler.on_add(obj)
