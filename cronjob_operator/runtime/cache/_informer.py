"""The shared informer: one reflector thread per kind, fanning events out to handlers.

An ``Informer`` owns a ``Store`` (with its indexes), the ``Reflector`` that fills it and
the event handlers (the controllers' sources). Each handler gets its own unbounded
buffer and thread, as client-go's ``processorListener`` (shared_informer.go: a
``pendingNotifications`` ring buffer per listener, drained by its own goroutine): the
reflector only appends an event to every buffer, so a slow or blocked handler (or its
map function, or its predicates) delays nobody's events but its own, and never the
watch. Each handler sees its events in order, one at a time, after the store already
reflects them, so a handler that enqueues a key and a worker that reads the cache agree
(the cache may be newer than the event, never older). A handler that raises is logged
and skipped; it never stops its thread. A handler whose ``runs_inline`` attribute is
true says it never blocks (the runtime's enqueue handlers of ``For`` and ``Owns`` without
predicates only map the object and add to a work queue): it is called on the reflector's
thread, in the same order, without a thread of its own (one wake-up less per event).
A handler added while the informer runs is first
given every cached object as an add, as client-go's ``AddEventHandler`` does once the
informer started (not only once it synced: a handler added mid-list misses nothing);
that replay only fills the new buffer, under the lock that orders it before any later
event, so an object changing meanwhile may reach the new handler twice, never not at all.

``has_synced`` means the store holds the first list (client-go's informer
``HasSynced``), not that every handler has processed it.

An informer of several namespaces (``namespace`` a sequence) runs one reflector per
namespace into its one store, as controller-runtime's multi-namespace cache runs one
informer per namespace; it has synced when every reflector has. Selectors and
``metadata_only`` go to every reflector (``_reflector``).

An object the reflector cannot decode is skipped, counted and reported (``metrics``,
``on_skip``), never a failure of the whole informer (``_reflector``).

``reselect`` changes the label selector of a running informer (every reflector syncs
again under it: ``_reflector``); ``has_synced_selection`` says when the store holds the
new selection. A sharded member uses it when its share changes (``sharding``).

Resync is local: every ``resync_period`` the cached objects are re-delivered as updates
(old == new); the API server is never asked.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache._reflector import (
    Reflector,
    SkipReporter,
    Transform,
    strip_managed_fields,
)
from cronjob_operator.runtime.cache._store import Store
from cronjob_operator.runtime.client import RestClient
from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.metrics import DEFAULT, Metrics

log = logging.getLogger(__name__)


class EventHandler(Protocol):
    """Receives an informer's events; ``on_delete`` gets the last known state."""

    def on_add(self, obj: objects.Obj) -> None: ...

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None: ...

    def on_delete(self, obj: objects.Obj) -> None: ...


_Notification = tuple[Callable[..., None], tuple[objects.Obj, ...]]


class _Delivery:
    """One handler, its bound methods (looked up once: the informer's dispatch is the
    per-event hot path) and its counts of calls handed over and finished."""

    def __init__(self, handler: EventHandler) -> None:
        self.handler = handler
        self.on_add, self.on_update, self.on_delete = (
            handler.on_add,
            handler.on_update,
            handler.on_delete,
        )
        # Handed over (written only under the informer's handlers lock) and finished
        # (written only by the thread that makes the calls): equal when it is idle.
        self.sent = 0
        self.handled = 0

    def _call(self, notification: _Notification) -> None:
        """Make one call; a handler that raises is logged and counts as finished."""
        method, args = notification
        try:
            method(*args)
        except Exception:
            log.exception("event handler %r failed", method)
        finally:
            self.handled += 1


class _Listener(_Delivery):
    """One handler, its unbounded buffer and the thread that drains it in order.

    ``put`` appends ``(method, args)`` and never blocks; ``on_add``/``on_update``/
    ``on_delete`` are the handler's bound methods.
    """

    def __init__(self, handler: EventHandler, name: str) -> None:
        super().__init__(handler)
        self._pending: queue.SimpleQueue[_Notification | None] = queue.SimpleQueue()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, notification: _Notification) -> None:
        """Buffer one call; the caller holds the informer's handlers lock."""
        self.sent += 1
        self._pending.put(notification)

    def stop(self) -> None:
        """Drop what is still buffered and end the thread after its current call."""
        self._stopped = True
        self._pending.put(None)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        get = self._pending.get
        while (notification := get()) is not None and not self._stopped:
            self._call(notification)


class _Inline(_Delivery):
    """A handler that ``runs_inline``: called at once, on the informer's thread."""

    def put(self, notification: _Notification) -> None:
        """Call the handler; the caller holds the informer's handlers lock."""
        self.sent += 1
        self._call(notification)

    def stop(self) -> None:
        return

    def join(self, timeout: float) -> None:
        return


class Informer:
    """Caches one kind (optionally in one namespace) and tells handlers what changed."""

    def __init__(
        self,
        rest: RestClient,
        kind: Kind,
        *,
        namespace: str | Sequence[str] | None = None,
        transform: Transform = strip_managed_fields,
        resync_period: float | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
        metrics: Metrics = DEFAULT,
        on_skip: SkipReporter | None = None,
    ) -> None:
        self.kind = kind
        self.store = Store()
        self._listeners: tuple[_Listener | _Inline, ...] = ()
        self._handlers_lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._resync_period = resync_period
        self._threads: list[threading.Thread] = []
        self._reflectors = [
            Reflector(
                rest,
                kind,
                self.store,
                _SyncTracker(self, index),
                namespace=one,
                transform=transform,
                label_selector=label_selector,
                field_selector=field_selector,
                metadata_only=metadata_only,
                metrics=metrics,
                on_skip=on_skip,
            )
            for index, one in enumerate(_namespaces(namespace))
        ]
        self._reflector = self._reflectors[0]
        self._selection_generations = [0] * len(self._reflectors)
        self._unsynced = set(range(len(self._reflectors)))

    @property
    def has_synced(self) -> bool:
        """True once the first list is in the store."""
        return self._synced.is_set()

    @property
    def last_error(self) -> Exception | None:
        """A reflector's latest list/watch failure, cleared by its next success."""
        return next((r.last_error for r in self._reflectors if r.last_error), None)

    def reselect(self, label_selector: str | None) -> None:
        """List and watch with ``label_selector`` from now on (module doc)."""
        with self._handlers_lock:
            self._selection_generations = [r.reselect(label_selector) for r in self._reflectors]

    def has_synced_selection(self) -> bool:
        """True once every reflector has synced under the selector of the last ``reselect``
        (or, before any, has synced at all)."""
        with self._handlers_lock:
            wanted = self._selection_generations
        return all(
            reflector.synced_generation >= generation
            for reflector, generation in zip(self._reflectors, wanted, strict=True)
        )

    def handlers_idle(self) -> bool:
        """True when every handler has finished every event the store has passed on so
        far: the store and the handlers' view agree. Quiescence checks need it, because
        the store is updated before a handler's thread sees the event (module doc)."""
        with self._handlers_lock:
            return all(listener.sent == listener.handled for listener in self._listeners)

    def add_handler(self, handler: EventHandler) -> None:
        """Give ``handler`` its own thread (none if it ``runs_inline``), first replaying it
        the cache (module doc)."""
        with self._handlers_lock:
            listener: _Listener | _Inline
            if getattr(handler, "runs_inline", False):
                listener = _Inline(handler)
            else:
                listener = _Listener(handler, f"handler-{self.kind.plural}-{len(self._listeners)}")
            self._listeners = (*self._listeners, listener)
            for obj in self.store.list():
                listener.put((listener.on_add, (obj,)))

    def start(self) -> None:
        """Start the reflector (and the resync timer) on daemon threads; returns at once."""
        if self._threads:
            return
        for reflector in self._reflectors:
            self._spawn(reflector.run, self._stop, name=f"reflector-{self.kind.plural}")
        if self._resync_period:
            self._spawn(self._resync_loop, self._resync_period, name=f"resync-{self.kind.plural}")

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching and wait (up to ``timeout``) for the threads to end."""
        self._stop.set()
        for reflector in self._reflectors:
            reflector.stop()
        listeners = self._listeners
        for listener in listeners:
            listener.stop()
        for thread in self._threads:
            thread.join(timeout)
        for listener in listeners:
            listener.join(timeout)

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Block until the first list is stored; False on timeout."""
        return self._synced.wait(timeout)

    def on_add(self, obj: objects.Obj) -> None:
        with self._handlers_lock:
            for listener in self._listeners:
                listener.put((listener.on_add, (obj,)))

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
        with self._handlers_lock:
            for listener in self._listeners:
                listener.put((listener.on_update, (old, new)))

    def on_delete(self, obj: objects.Obj) -> None:
        with self._handlers_lock:
            for listener in self._listeners:
                listener.put((listener.on_delete, (obj,)))

    def on_synced(self) -> None:
        """Every reflector has synced (an informer of one namespace: its only one)."""
        self._synced.set()

    def reflector_synced(self, index: int) -> None:
        with self._handlers_lock:
            self._unsynced.discard(index)
            done = not self._unsynced
        if done:
            self.on_synced()

    def _resync_loop(self, period: float) -> None:
        while not self._stop.wait(period):
            for obj in self.store.list():
                self.on_update(obj, obj)

    def _spawn(self, target: Callable[..., None], *args: Any, name: str) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)


class _SyncTracker:
    """One reflector's sink: events go to the informer; its sync is counted."""

    def __init__(self, informer: Informer, index: int) -> None:
        self._informer = informer
        self._index = index

    def on_add(self, obj: objects.Obj) -> None:
        self._informer.on_add(obj)

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
        self._informer.on_update(old, new)

    def on_delete(self, obj: objects.Obj) -> None:
        self._informer.on_delete(obj)

    def on_synced(self) -> None:
        self._informer.reflector_synced(self._index)


def _namespaces(namespace: str | Sequence[str] | None) -> list[str | None]:
    """One entry per reflector: all namespaces (None), one, or each of several."""
    if namespace is None or isinstance(namespace, str):
        return [namespace]
    if not namespace:
        raise ValueError("an informer of several namespaces needs at least one")
    return list(dict.fromkeys(namespace))
