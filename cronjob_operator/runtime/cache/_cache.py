"""The informer cache: a ``Reader`` served from memory, with controller-runtime's field indexes.

One shared ``Informer`` per kind, created on first use (a controller's watch, an
``index_field`` call, or a read) and started with the cache; a read of a kind that has
no informer yet starts one and waits for its sync, as controller-runtime's lazy
informers do. ``wait_for_sync`` blocks until every informer has listed, with a timeout
whose error names the kinds that did not sync.

Field indexes follow controller-runtime exactly, because callers depend on the keying:
``index_field(kind, field, fn)`` stores each value ``v`` that ``fn`` returns under
``"<namespace>/v"`` and under ``"__all_namespaces/v"``; ``list(namespace=ns,
matching_fields={field: v})`` looks up ``"<ns>/v"`` (``"__all_namespaces/v"`` without a
namespace). Only exact matches exist, and ``matching_fields`` on a field without an index
raises ``UnindexedFieldError``: it never falls back to a silent scan.

What each kind's informer lists and watches is its ``KindOptions`` (controller-runtime's
``cache.Options.ByObject``): label and field selectors the API server applies,
namespaces (one informer per namespace filling one store; the cache's own ``namespace``
otherwise), a transform, and ``metadata_only`` (``PartialObjectMetadata``: only each
object's metadata is sent and cached, for kinds whose content is never read).
Options are set before anything uses the kind's informer (``set_kind_options``,
``set_transform``, ``set_label_selector``, or the constructor's ``kind_options``).

Reads return the cached (frozen) objects themselves: no copy, and no way to corrupt the
cache. ``objects.thaw`` gives a mutable copy to a caller that wants one. What a get and
a list return from a store (``lookup``, ``select``) is written once, here, and the fake
client (``fake``) reads its own stores through the same two functions.
"""

from __future__ import annotations

import builtins
import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache._informer import Informer
from cronjob_operator.runtime.cache._labels import parse_selector
from cronjob_operator.runtime.cache._reflector import SkipReporter, Transform, strip_managed_fields
from cronjob_operator.runtime.cache._store import NAMESPACE_INDEX, Store
from cronjob_operator.runtime.client import RestClient, not_found
from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.metrics import DEFAULT, Metrics
from cronjob_operator.runtime.runnable import run_between

ALL_NAMESPACES = "__all_namespaces"
DEFAULT_SYNC_TIMEOUT = 120.0

FieldIndexFunc = Callable[[objects.Obj], Iterable[str]]


@dataclass(frozen=True, slots=True)
class KindOptions:
    """What the cache lists, watches and keeps of one kind (the module doc)."""

    label_selector: str | None = None
    """Only objects whose labels match (``app=web,tier in (a,b)``), filtered by the server."""
    field_selector: str | None = None
    """Only objects whose fields match (``status.phase=Running``), filtered by the server."""
    namespaces: tuple[str, ...] | None = None
    """Only these namespaces (None: the cache's namespace, or all); namespaced kinds only."""
    transform: Transform | None = None
    """Applied to each object before it is cached (None: strip ``managedFields``)."""
    metadata_only: bool = False
    """Cache ``PartialObjectMetadata``: each object's apiVersion, kind and metadata only."""

    def __post_init__(self) -> None:
        if self.namespaces is not None and not self.namespaces:
            raise ValueError("KindOptions.namespaces: name at least one namespace, or None")


_DEFAULT_OPTIONS = KindOptions()


class UnindexedFieldError(LookupError):
    """``matching_fields`` named a field that has no index for that kind."""


class CacheSyncTimeoutError(TimeoutError):
    """Informers did not finish their first list in time."""


def field_index_name(field: str) -> str:
    """The store index that holds a field index."""
    return f"field:{field}"


def _namespaced_values(fn: FieldIndexFunc) -> Callable[[objects.Obj], list[str]]:
    def index(obj: objects.Obj) -> list[str]:
        namespace = objects.namespace_of(obj)
        keys: list[str] = []
        for value in fn(obj):
            keys.append(f"{ALL_NAMESPACES}/{value}")
            if namespace:
                keys.append(f"{namespace}/{value}")
        return keys

    return index


class Cache:
    """Shared informers for every kind the manager reads, and indexed reads over them."""

    def __init__(
        self,
        rest: RestClient,
        *,
        namespace: str | None = None,
        transforms: Mapping[Kind, Transform] | None = None,
        kind_options: Mapping[Kind, KindOptions] | None = None,
        resync_period: float | None = None,
        sync_timeout: float = DEFAULT_SYNC_TIMEOUT,
        metrics: Metrics = DEFAULT,
        on_skip: SkipReporter | None = None,
    ) -> None:
        """``metrics`` and ``on_skip`` go to every informer: where the objects that no
        informer could decode are counted and reported."""
        self._rest = rest
        self._namespace = namespace
        self._options: dict[Kind, KindOptions] = dict(kind_options or {})
        for kind, transform in (transforms or {}).items():
            self._options[kind] = dataclasses.replace(self.kind_options(kind), transform=transform)
        self._resync_period = resync_period
        self._sync_timeout = sync_timeout
        self._metrics = metrics
        self._on_skip = on_skip
        self._informers: dict[Kind, Informer] = {}
        self._lock = threading.Lock()
        self._started = False

    def kind_options(self, kind: Kind) -> KindOptions:
        """What the cache lists, watches and keeps of ``kind`` (defaults when never set)."""
        return self._options.get(kind, _DEFAULT_OPTIONS)

    def set_kind_options(self, kind: Kind, options: KindOptions) -> None:
        """List, watch and keep ``kind`` as ``options`` say; before its informer exists."""
        with self._lock:
            if kind in self._informers:
                raise RuntimeError(f"options for {kind} set after its informer was created")
            self._options[kind] = options

    def set_transform(self, kind: Kind, transform: Transform) -> None:
        """Transform ``kind``'s objects before caching (e.g. keep only what is read).

        Must be called before anything uses the kind's informer.
        """
        self._update_options(kind, transform=transform)

    def set_label_selector(self, kind: Kind, selector: str) -> None:
        """Cache only the objects of ``kind`` that ``selector`` matches, filtered by the API
        server (the selector goes on the informer's list and watch): a sharded controller
        caches only its share. Must be called before anything uses the kind's informer.
        """
        self._update_options(kind, label_selector=selector)

    def reselect(self, kind: Kind, selector: str) -> None:
        """Change ``kind``'s label selector while its informer runs: the informer syncs
        again under ``selector`` (objects that stop matching leave as deletes, new matches
        arrive as adds); ``Informer.has_synced_selection`` says when that is done."""
        with self._lock:
            self._options[kind] = dataclasses.replace(
                self.kind_options(kind), label_selector=selector
            )
            informer = self._informers.get(kind)
        if informer is not None:
            informer.reselect(selector)

    def _update_options(self, kind: Kind, **changes: Any) -> None:
        with self._lock:
            if kind in self._informers:
                raise RuntimeError(f"options for {kind} set after its informer was created")
            self._options[kind] = dataclasses.replace(self.kind_options(kind), **changes)

    def informer(self, kind: Kind) -> Informer:
        """The shared informer of ``kind``, created (and started, if the cache runs) on demand."""
        with self._lock:
            informer = self._informers.get(kind)
            if informer is None:
                informer = self._new_informer(kind, self.kind_options(kind))
                self._informers[kind] = informer
                if self._started:
                    informer.start()
            return informer

    def _new_informer(self, kind: Kind, options: KindOptions) -> Informer:
        namespace: str | tuple[str, ...] | None = None
        if kind.namespaced:
            namespace = options.namespaces or self._namespace
        return Informer(
            self._rest,
            kind,
            namespace=namespace,
            transform=options.transform or strip_managed_fields,
            resync_period=self._resync_period,
            label_selector=options.label_selector,
            field_selector=options.field_selector,
            metadata_only=options.metadata_only,
            metrics=self._metrics,
            on_skip=self._on_skip,
        )

    def index_field(self, kind: Kind, field: str, fn: FieldIndexFunc) -> None:
        """Index ``kind`` by ``field``: ``fn`` returns the values an object has for it."""
        add_field_index(self.informer(kind).store, field, fn)

    needs_leader_election = False
    """A manager Runnable on every replica: a follower keeps a warm cache."""

    def run(self, stop: threading.Event) -> None:
        """Run the informers until ``stop`` is set (the Runnable entry point)."""
        run_between(stop, self.start, self.stop)

    def start(self) -> None:
        """Start every informer; informers created later start at once. Returns at once."""
        with self._lock:
            self._started = True
        for informer in self._all_informers():
            informer.start()

    def stop(self) -> None:
        """Stop every informer's watch and thread."""
        for informer in self._all_informers():
            informer.stop()

    def wait_for_sync(self, timeout: float | None = None) -> None:
        """Block until every informer has synced; ``CacheSyncTimeoutError`` names the laggards."""
        limit = self._sync_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        informers = self._all_informers()
        for informer in informers:
            informer.wait_for_sync(max(0.0, deadline - time.monotonic()))
        lagging = [informer for informer in informers if not informer.has_synced]
        if lagging:
            detail = "; ".join(
                f"{inf.kind} (last error: {inf.last_error or 'none'})" for inf in lagging
            )
            raise CacheSyncTimeoutError(
                f"timed out after {limit:.0f}s waiting for caches to sync: {detail}"
            )

    @property
    def synced(self) -> bool:
        """True when every informer has synced (the readiness check)."""
        return all(informer.has_synced for informer in self._all_informers())

    def _all_informers(self) -> builtins.list[Informer]:
        with self._lock:
            return builtins.list(self._informers.values())

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
        """The cached object, or ``errors.NotFound``."""
        return lookup(kind, self._synced_informer(kind).store, name, namespace)

    def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        matching_fields: Mapping[str, str] | None = None,
        label_selector: str | Mapping[str, str] | None = None,
    ) -> list[objects.Obj]:
        """Cached objects, through an index whenever the query names one."""
        return select(
            kind,
            self._synced_informer(kind).store,
            namespace=namespace,
            matching_fields=matching_fields,
            label_selector=label_selector,
        )

    def _synced_informer(self, kind: Kind) -> Informer:
        informer = self.informer(kind)
        if not informer.has_synced:
            informer.start()  # a no-op when the cache already started it
            if not informer.wait_for_sync(self._sync_timeout):
                raise CacheSyncTimeoutError(
                    f"timed out waiting for the {kind} cache to sync "
                    f"(last error: {informer.last_error or 'none'})"
                )
        return informer


def add_field_index(store: Store, field: str, fn: FieldIndexFunc) -> None:
    """File ``store``'s objects by ``field`` under controller-runtime's keys (module doc)."""
    store.add_indexer(field_index_name(field), _namespaced_values(fn))


def store_key(kind: Kind, name: str, namespace: str | None) -> str:
    """The key ``name`` has in a store of ``kind`` (``namespace`` is ignored for a
    cluster-scoped kind); ``objects.object_key`` gives the same key from an object."""
    return f"{namespace}/{name}" if namespace and kind.namespaced else name


def lookup(kind: Kind, store: Store, name: str, namespace: str | None) -> objects.Obj:
    """The object a ``Reader.get`` returns from one kind's ``store``, or ``errors.NotFound``.

    The one implementation of get semantics, shared by the cache and the fake client.
    """
    obj = store.get(store_key(kind, name, namespace))
    if obj is None:
        raise not_found(kind, name, namespace)
    return obj


def select(
    kind: Kind,
    store: Store,
    *,
    namespace: str | None = None,
    matching_fields: Mapping[str, str] | None = None,
    label_selector: str | Mapping[str, str] | None = None,
) -> builtins.list[objects.Obj]:
    """The objects of one kind's ``store`` that a ``Reader.list`` with these options returns.

    The one implementation of list semantics, shared by the cache and the fake client:
    field matches only through an index (``UnindexedFieldError`` otherwise), then labels.
    """
    if matching_fields:
        result = _by_fields(kind, store, namespace, matching_fields)
    elif namespace and kind.namespaced:
        result = store.by_index(NAMESPACE_INDEX, namespace)
    else:
        result = store.list()
    if label_selector:
        matches = parse_selector(label_selector)
        result = [obj for obj in result if matches((obj.get("metadata") or {}).get("labels") or {})]
    return result


def _by_fields(
    kind: Kind,
    store: Store,
    namespace: str | None,
    matching_fields: Mapping[str, str],
) -> builtins.list[objects.Obj]:
    scope = namespace if namespace and kind.namespaced else ALL_NAMESPACES
    result: builtins.list[objects.Obj] | None = None
    for field, value in matching_fields.items():
        index = field_index_name(field)
        if not store.has_index(index):
            raise UnindexedFieldError(
                f"no index for field {field!r} on {kind}: register it with "
                f"cache.index_field({kind.kind}, {field!r}, fn) before listing by it"
            )
        found = store.by_index(index, f"{scope}/{value}")
        if result is None:
            result = found
        else:
            keys = {objects.object_key(obj) for obj in found}
            result = [obj for obj in result if objects.object_key(obj) in keys]
    return result or []
