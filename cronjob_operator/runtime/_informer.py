"""The shared informer: one reflector thread per kind, fanning events out to handlers.

An ``Informer`` owns a ``Store`` (with its indexes), the ``Reflector`` that fills it and
the list of event handlers (the controllers' sources). Handlers run on the informer's
thread, after the store already reflects the event, so a handler that enqueues a key
and a worker that reads the cache always agree. A handler that raises is logged and
skipped; it never stops the informer. A handler added after the first sync is first
given every cached object as an add, as client-go does.

Resync is local: every ``resync_period`` the cached objects are re-delivered as updates
(old == new); the API server is never asked.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from cronjob_operator.runtime import objects
from cronjob_operator.runtime._reflector import Reflector, Transform, strip_managed_fields
from cronjob_operator.runtime._rest import RestClient
from cronjob_operator.runtime._store import Store
from cronjob_operator.runtime.kinds import Kind

__all__ = ["EventHandler", "Informer"]

log = logging.getLogger(__name__)


class EventHandler(Protocol):
    """Receives an informer's events; ``on_delete`` gets the last known state."""

    def on_add(self, obj: objects.Obj) -> None: ...

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None: ...

    def on_delete(self, obj: objects.Obj) -> None: ...


class Informer:
    """Caches one kind (optionally in one namespace) and tells handlers what changed."""

    def __init__(
        self,
        rest: RestClient,
        kind: Kind,
        *,
        namespace: str | None = None,
        transform: Transform = strip_managed_fields,
        resync_period: float | None = None,
    ) -> None:
        self.kind = kind
        self.store = Store()
        self._handlers: list[EventHandler] = []
        self._handlers_lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._resync_period = resync_period
        self._threads: list[threading.Thread] = []
        self._reflector = Reflector(
            rest, kind, self.store, self, namespace=namespace, transform=transform
        )

    @property
    def has_synced(self) -> bool:
        """True once the first list is in the store."""
        return self._synced.is_set()

    @property
    def last_error(self) -> Exception | None:
        """The reflector's latest list/watch failure, cleared by the next success."""
        return self._reflector.last_error

    def add_handler(self, handler: EventHandler) -> None:
        """Register ``handler``; after sync it is first replayed every cached object."""
        with self._handlers_lock:
            self._handlers.append(handler)
            if self.has_synced:
                for obj in self.store.list():
                    _call(handler.on_add, obj)

    def start(self) -> None:
        """Start the reflector (and the resync timer) on daemon threads; returns at once."""
        if self._threads:
            return
        self._spawn(self._reflector.run, self._stop, name=f"reflector-{self.kind.plural}")
        if self._resync_period:
            self._spawn(self._resync_loop, self._resync_period, name=f"resync-{self.kind.plural}")

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching and wait (up to ``timeout``) for the threads to end."""
        self._stop.set()
        self._reflector.stop()
        for thread in self._threads:
            thread.join(timeout)

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Block until the first list is stored; False on timeout."""
        return self._synced.wait(timeout)

    def on_add(self, obj: objects.Obj) -> None:
        for handler in self._snapshot():
            _call(handler.on_add, obj)

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
        for handler in self._snapshot():
            _call(handler.on_update, old, new)

    def on_delete(self, obj: objects.Obj) -> None:
        for handler in self._snapshot():
            _call(handler.on_delete, obj)

    def on_synced(self) -> None:
        self._synced.set()

    def _snapshot(self) -> list[EventHandler]:
        with self._handlers_lock:
            return list(self._handlers)

    def _resync_loop(self, period: float) -> None:
        while not self._stop.wait(period):
            for obj in self.store.list():
                self.on_update(obj, obj)

    def _spawn(self, target: Callable[..., None], *args: Any, name: str) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)


def _call(method: Callable[..., None], *args: objects.Obj) -> None:
    try:
        method(*args)
    except Exception:
        log.exception("event handler %r failed", method)
