"""The reflector: keeps a store equal to the API server's objects of one kind.

It follows client-go's ListAndWatch (v1.36, with WatchListClient on):

* The initial state is streamed (KEP-3157 "watch-list"): one WATCH with
  ``sendInitialEvents=true``, ``resourceVersionMatch=NotOlderThan`` and bookmarks on. The
  server sends every object as an ADDED event, then a BOOKMARK annotated
  ``k8s.io/initial-events-end``; at that bookmark the collected objects replace the store
  and the same stream goes on as the watch. Objects arrive one line at a time, so the
  process never holds a whole collection's JSON body (the point of the KEP: peak memory).
  The first stream asks for ``resourceVersion=""`` (a consistent snapshot), later ones
  for the last version seen (``rewatchResourceVersion``).
* When the server refuses a streaming list (the ``WatchList`` feature gate off, an old
  server: any non-transient error other than 410 before the bookmark), the reflector
  falls back to a paged LIST (``limit``/``continue``, 500 per page) for that sync, with
  client-go's versions (``relistResourceVersion``): ``resourceVersion=0`` (the watch
  cache) the first time, the last version seen later; then a WATCH from the list's
  version. The next sync tries streaming again, as client-go does.
* 410 Gone, as client-go's reflector.go treats it. A watch that ends with 410 (an HTTP
  status or an ERROR event) syncs again from the last version seen, not from ``""``:
  a LIST or stream at a version means "at least as fresh as", so the version that
  expired for the watch still serves it (``DefaultWatchErrorHandler`` and ``watch()``:
  "Don't set LastSyncResourceVersionUnavailable"). Only when that LIST or streamed sync
  itself answers 410 is the version unavailable
  (``setIsLastSyncResourceVersionUnavailable(true)``), and the sync is retried at once
  from ``""``, a consistent (quorum) read; a sync that succeeds clears it. Objects that
  vanished between two syncs are delivered as deletes carrying their last known state
  (tombstones). (A 410 on a LIST's continue page relists from ``""`` too; client-go's
  pager would list that version again unpaged.)
* Every WATCH has bookmarks on and a server-side ``timeoutSeconds`` drawn between 5 and
  10 minutes (client-go's ``minWatchTimeout``..``2*minWatchTimeout``), so a fleet of
  operators does not reconnect in lock-step, and the server ends every watch, a quiet
  one too, by that time. The client's read timeout for the stream is that timeout plus
  ``WATCH_READ_GRACE``: a healthy watch always ends on the server's side first, cleanly,
  and is watched again from the last version seen, without a new sync or any warning.
  A dead connection is found by TCP keepalive (see ``_rest``), a server that never ends
  its own watch by the read timeout. Bookmarks only move the version.
* Failures back off as client-go's reflector does (``NewExponentialBackoffManager(800ms,
  30s, 2min, 2.0, 1.0)``: 0.8 s doubling to 30 s, each delay jittered up to twice itself,
  so [30, 60) s at the cap, about 0.02 requests/s; reset after two quiet minutes) and never
  end the reflector's thread; a watch's 410 waits that backoff too before its sync, as
  client-go's ``BackoffUntil`` around ``ListAndWatch`` does.
* A watch that ends under a second after it opened without a single event (bookmarks
  count) is a failure and backs off, as client-go's ``handleAnyWatch`` ("very short
  watch"): a server or proxy that closes every watch at once must not be asked again at
  once, thousands of times a second. A watch ended by ``stop`` or ``reselect`` is not.
* A retry the API server asked for (``errors.server_asked_retry``: a 429 or a 5xx with
  ``Retry-After``, such as "storage is (re)initializing" while a just-created CRD's
  storage starts) is not a warning until it lasts: the first of an episode is logged at
  info, its repeats at debug, and once the server has been asking for
  ``ASKED_RETRY_QUIET`` seconds, each further one at warning (client-go logs a watch's
  429 at ``V(2)`` and never warns). An episode ends when a watch opens or a sync
  completes. Every other failure is a warning at once. The backoff is the same for all.
* A 403 (RBAC lacks a verb) is logged once at error level, naming the verb and the
  resource, and again only when the API's message changes; repeats go to debug, so a
  missing permission gives one clear line instead of one per retry. It backs off like
  any failure, and the informer stays unsynced (the manager reports not-ready).

Each object is transformed (``managedFields`` stripped by default) and frozen once, on
arrival, so every later read can share it without copying. A sync that brings an object
again at the version the store holds keeps the stored copy (``_decode_unless_stored``).

No single object can stop the reflector. Decoding (``client._json``) and freezing
(``objects.freeze``) have no depth limit a stored object can reach. An object that still
cannot be decoded (its transform raises, say) is skipped, never retried as a failure of
the whole list: it is logged at error level with its key, counted in
``informer_objects_skipped_total{kind}``, handed to ``on_skip`` (the manager records a
Warning event on it), and treated as absent (left out of a sync; an update removes the
stored version, delivered as a delete) until a later version decodes. Every other object
is served as usual.

What is listed and watched: a label and a field selector go on every list and watch, so
the API server filters; ``metadata_only`` asks for ``PartialObjectMetadata`` (client-go's
metadata informer), and each such object is stored as the kind it is of (its
``apiVersion`` and ``kind``) with its ``metadata`` alone. A reflector of one namespace
replaces only that namespace's objects when it syncs, so several can fill one store.

``reselect`` changes the label selector while the reflector runs (a sharded member
whose share changed): the open watch is cut and the reflector syncs again under the new
selector from the last version seen, so objects that no longer match leave the store as
deletes and new matches arrive as adds; ``synced_generation`` reaching the generation
``reselect`` returned says the store holds the new selection. A sync under the old
selector that was cut this way is not a failure: no warning, no backoff.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.cache._store import NAMESPACE_INDEX, Store
from cronjob_operator.runtime.client import (
    JSON,
    METADATA,
    METADATA_LIST,
    RestClient,
    WatchStream,
)
from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.metrics import DEFAULT, Metrics

log = logging.getLogger(__name__)

Transform = Callable[[dict[str, Any]], dict[str, Any]]
"""Changes a freshly decoded object before it is frozen into the cache."""
SkipReporter = Callable[[objects.Obj, Exception], None]
"""Told of each object the reflector skips: a reference to it (``apiVersion``, ``kind``
and the identifying ``metadata``) and why."""

PAGE_SIZE = 500
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
WATCH_TIMEOUT_RANGE = (300, 600)
WATCH_READ_GRACE = 30.0
"""How much longer than its ``timeoutSeconds`` the client waits on a silent watch."""
LIST_TIMEOUT = 120.0
BACKOFF_INITIAL, BACKOFF_MAXIMUM, BACKOFF_RESET = 0.8, 30.0, 120.0
"""client-go's reflector backoff: the first delay, the cap, and the quiet that resets it."""
SHORT_WATCH = 1.0
"""A watch that ends sooner than this with no event is a failure (client-go's 1 s)."""
ASKED_RETRY_QUIET = 30.0
"""How long the server may ask for retries (429, 5xx with Retry-After) before it is a warning."""
_REFERENCE_FIELDS = ("name", "namespace", "uid", "resourceVersion")


def strip_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The default transform: drop ``metadata.managedFields``, which no controller reads."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj


class EventSink(Protocol):
    """Where the reflector reports changes, after the store has been updated."""

    def on_add(self, obj: objects.Obj) -> None: ...

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None: ...

    def on_delete(self, obj: objects.Obj) -> None: ...

    def on_synced(self) -> None: ...


class Backoff:
    """Jittered exponential backoff that resets after a quiet period."""

    def __init__(
        self,
        initial: float = BACKOFF_INITIAL,
        maximum: float = BACKOFF_MAXIMUM,
        reset_after: float = BACKOFF_RESET,
        clock: Callable[[], float] = time.monotonic,
        jitter: float = 1.0,
    ) -> None:
        self._initial, self._maximum, self._reset_after = initial, maximum, reset_after
        self._clock = clock
        self._jitter = jitter
        self._current = 0.0
        self._last_failure = -float("inf")

    def next_delay(self) -> float:
        """The delay before the next attempt, after one more failure."""
        now = self._clock()
        if now - self._last_failure > self._reset_after:
            self._current = 0.0
        self._last_failure = now
        self._current = min(self._maximum, self._current * 2 if self._current else self._initial)
        return self._current * random.uniform(1.0, 1.0 + self._jitter)


class Reflector:
    """List-and-watch for one kind, feeding ``store`` and then ``sink``."""

    def __init__(
        self,
        rest: RestClient,
        kind: Kind,
        store: Store,
        sink: EventSink,
        *,
        namespace: str | None = None,
        transform: Transform = strip_managed_fields,
        list_timeout: float = LIST_TIMEOUT,
        watch_list: bool = True,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
        metrics: Metrics = DEFAULT,
        on_skip: SkipReporter | None = None,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[threading.Event, float], bool] = threading.Event.wait,
    ) -> None:
        """``clock`` times each watch and the backoff's quiet period, and ``wait`` sleeps
        a backoff's delay (returning early when the event is set): tests inject both."""
        self._rest = rest
        self._kind = kind
        self._store = store
        self._sink = sink
        self._namespace = namespace
        self._transform = transform
        self._list_timeout = list_timeout
        self._watch_list = watch_list
        self._field_selector = field_selector
        self._selection = _selection(label_selector, field_selector)
        self.generation = 0
        """Counts ``reselect`` calls: the selection a sync started under."""
        self.synced_generation = -1
        """The generation of the selection the store last synced under (-1: never)."""
        self._syncing_generation = 0
        self._reselected = False
        self._metadata_only = metadata_only
        self._list_accept = METADATA_LIST if metadata_only else JSON
        self._watch_accept = METADATA if metadata_only else JSON
        self._stream: WatchStream | None = None
        self._lock = threading.Lock()
        self.resource_version = ""
        self.last_error: Exception | None = None
        self.streamed_syncs = 0
        self.listed_syncs = 0
        self._need_sync = True
        self._version_unavailable = False
        self._verb = "list"
        self._reported_forbidden = ""
        self._reported_stream_refusal = ""
        self._asked_retry_since: float | None = None
        self._skipped = metrics.informer_objects_skipped.labels(str(kind))
        self._on_skip = on_skip
        self._clock = clock
        self._wait = wait

    def run(self, stop: threading.Event) -> None:
        """Sync and watch until ``stop`` is set; errors back off and retry, never escape."""
        backoff = Backoff(clock=self._clock)
        self._need_sync = True
        while not stop.is_set():
            self._take_reselection()
            try:
                if self._need_sync:
                    self._sync(stop)
                else:
                    self._watch(stop)
                self.last_error = None
            except errors.Forbidden as exc:
                self.last_error = exc
                delay = backoff.next_delay()
                self._report_forbidden(exc, delay)
                self._wait(stop, delay)
            except errors.Gone:
                delay = backoff.next_delay()
                log.info(
                    "%s: resourceVersion %s is gone; syncing again in %.1fs",
                    self._kind,
                    self.resource_version,
                    delay,
                )
                self._need_sync = True
                self._wait(stop, delay)
            except Exception as exc:  # any failure: log, back off, keep the thread alive
                if self._reselection_pending():
                    continue  # cut on purpose: sync again under the new selector at once
                self.last_error = exc
                delay = backoff.next_delay()
                self._report_failure(exc, delay)
                self._wait(stop, delay)

    def reselect(self, label_selector: str | None) -> int:
        """Select with ``label_selector`` from now on (module doc); returns the generation
        whose sync ``synced_generation`` will report."""
        with self._lock:
            self._selection = _selection(label_selector, self._field_selector)
            self._reselected = True
            self.generation += 1
            generation = self.generation
            stream = self._stream
        if stream is not None:
            stream.close()
        return generation

    def _take_reselection(self) -> None:
        """A reselection since the last look means a sync under the new selector."""
        with self._lock:
            if self._reselected:
                self._reselected = False
                self._need_sync = True

    def _reselection_pending(self) -> bool:
        with self._lock:
            return self._reselected

    def _sync(self, stop: threading.Event) -> None:
        """Fill the store (streamed, else a paged LIST), then keep watching."""
        if self._watch_list:
            try:
                self._unless_gone(lambda: self._watch(stop, stream_initial=True))
                return
            except errors.ApiError as exc:
                if not self._need_sync or isinstance(exc, errors.Gone) or errors.is_transient(exc):
                    raise
                self._report_stream_refusal(exc)
        self._unless_gone(lambda: self._list(self._list_resource_version()))
        self._watch(stop)

    def _unless_gone(self, sync: Callable[[], None]) -> None:
        """Run ``sync``; if it answers 410 before it synced, once more from ``""``.

        client-go's ``list()`` and ``watchList()``: the version asked for is unavailable
        (``setIsLastSyncResourceVersionUnavailable(true)``), so retry at once with a
        consistent read. A 410 after the sync (the watch's) is ``run``'s to handle.
        """
        try:
            sync()
        except errors.Gone:
            if not self._need_sync or self._version_unavailable:
                raise
            log.info(
                "%s: resourceVersion %s is gone; syncing from a consistent read",
                self._kind,
                self.resource_version,
            )
            self._version_unavailable = True
            sync()

    def _list_resource_version(self) -> str:
        """client-go's ``relistResourceVersion``: the watch cache, the last seen, "" after 410."""
        if self._version_unavailable:
            return ""
        return self.resource_version or "0"

    def _report_stream_refusal(self, exc: errors.ApiError) -> None:
        """Say once per distinct refusal that the sync falls back to paged lists.

        Retries after backoff meet the same refusal; repeating the line would bury
        the one error that says what to fix (the paged LIST reports it).
        """
        level = logging.DEBUG if exc.message == self._reported_stream_refusal else logging.INFO
        self._reported_stream_refusal = exc.message
        log.log(
            level,
            "%s: the API server refused a streaming list (%s %s); listing in pages",
            self._kind,
            exc.code,
            exc.message,
        )

    def _report_failure(self, exc: Exception, delay: float) -> None:
        """A failed sync or watch: a warning, unless the server asked for the retry and
        has not been asking for ``ASKED_RETRY_QUIET`` yet (module doc)."""
        if not errors.server_asked_retry(exc):
            log.warning("%s: list/watch failed, retrying in %.1fs: %s", self._kind, delay, exc)
            return
        now = self._clock()
        if self._asked_retry_since is None:
            self._asked_retry_since = now
            log.info(
                "%s: the API server asked to retry the list/watch; retrying in %.1fs: %s",
                self._kind,
                delay,
                exc,
            )
            return
        asking = now - self._asked_retry_since
        if asking < ASKED_RETRY_QUIET:
            log.debug(
                "%s: the API server asked to retry the list/watch again; retrying in %.1fs: %s",
                self._kind,
                delay,
                exc,
            )
            return
        log.warning(
            "%s: list/watch failed, retrying in %.1fs: %s (the API server has asked to retry "
            "for %.0fs)",
            self._kind,
            delay,
            exc,
            asking,
        )

    def _report_forbidden(self, exc: errors.Forbidden, delay: float) -> None:
        resource = (
            f"{self._kind.plural}.{self._kind.group}" if self._kind.group else self._kind.plural
        )
        if exc.message == self._reported_forbidden:
            log.debug(
                "%s: still forbidden to %s %s, retrying in %.1fs",
                self._kind,
                self._verb,
                resource,
                delay,
            )
            return
        self._reported_forbidden = exc.message
        log.error(
            "%s: forbidden to %s %s; grant the verb to the operator's service account "
            "(retrying with backoff; not ready until it succeeds): %s",
            self._kind,
            self._verb,
            resource,
            exc.message,
        )

    def stop(self) -> None:
        """Cut the open watch so ``run`` notices its stop event at once."""
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()

    def _list(self, resource_version: str) -> None:
        self._verb = "list"
        items: list[objects.Obj] = []
        selection, self._syncing_generation = self._current_selection()
        params: dict[str, Any] = {
            "limit": PAGE_SIZE,
            "resourceVersion": resource_version,
            **selection,
        }
        path = self._kind.collection_path(self._namespace)
        while True:
            page = self._rest.request(
                "GET", path, params=params, timeout=self._list_timeout, accept=self._list_accept
            )
            decoded = (self._decode_unless_stored(item) for item in page.get("items") or ())
            items.extend(obj for obj in decoded if obj is not None)
            metadata = page.get("metadata") or {}
            token = metadata.get("continue")
            if not token:
                break
            params = {"limit": PAGE_SIZE, "continue": token, **selection}
        self.listed_syncs += 1
        self._synced(items, str(metadata.get("resourceVersion") or ""))

    def _synced(self, items: list[objects.Obj], resource_version: str) -> None:
        self._replace(items)
        self.resource_version = resource_version
        self.synced_generation = self._syncing_generation
        self._need_sync, self._version_unavailable = False, False
        self._answered()
        self._sink.on_synced()

    def _replace(self, items: list[objects.Obj]) -> None:
        # Scoped to this reflector's namespace: a cache of several namespaces fills one
        # store from one reflector per namespace, and a relist replaces only its own.
        mine = (
            self._store.by_index(NAMESPACE_INDEX, self._namespace)
            if self._namespace
            else self._store.list()
        )
        before = {objects.object_key(obj): obj for obj in mine}
        vanished = self._store.replace(items, namespace=self._namespace)
        for obj in items:
            old = before.get(objects.object_key(obj))
            if old is None:
                self._sink.on_add(obj)
            elif _resource_version(old) != _resource_version(obj):
                self._sink.on_update(old, obj)
        for obj in vanished:
            self._sink.on_delete(obj)

    def _watch(self, stop: threading.Event, *, stream_initial: bool = False) -> None:
        """Watch from the last version; with ``stream_initial``, sync from the stream first."""
        self._verb = "watch"
        timeout_seconds = random.randint(*WATCH_TIMEOUT_RANGE)
        selection, generation = self._current_selection()
        params: dict[str, Any] = {
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
            **selection,
        }
        initial: dict[str, objects.Obj] | None = None
        if stream_initial:
            self._syncing_generation = generation
            initial = {}
            params["resourceVersion"] = "" if self._version_unavailable else self.resource_version
            params |= {"sendInitialEvents": True, "resourceVersionMatch": "NotOlderThan"}
        if self._reselection_pending():
            return  # a new selector came meanwhile: sync under it instead (``run``)
        stream = self._rest.watch(
            self._kind.collection_path(self._namespace),
            params,
            read_timeout=timeout_seconds + WATCH_READ_GRACE,
            accept=self._watch_accept,
        )
        with self._lock:
            self._stream = stream
            reselected = self._reselected
        self._answered()
        opened, events = self._clock(), 0
        try:
            if stop.is_set() or reselected:
                return
            for event in stream:
                events += 1
                if initial is None:
                    self._handle(event)
                elif self._collect(event, initial):
                    initial = None
                if stop.is_set():
                    return
            if initial is not None:
                raise errors.TransportError(
                    f"{self._kind}: the stream ended before the {INITIAL_EVENTS_END} bookmark"
                )
            lasted = self._clock() - opened
            cut = stop.is_set() or self._reselection_pending()  # ended here, not by the server
            if lasted < SHORT_WATCH and not events and not cut:
                raise errors.TransportError(
                    f"{self._kind}: very short watch: the server ended it after {lasted:.3f}s "
                    "with no events"
                )
        finally:
            with self._lock:
                self._stream = None
            stream.close()

    def _answered(self) -> None:
        """The server answered (a watch opened, a sync completed): what it refused or asked
        to retry before is over, so the next refusal is reported afresh."""
        self._reported_forbidden = ""
        self._asked_retry_since = None

    def _collect(self, event: dict[str, Any], initial: dict[str, objects.Obj]) -> bool:
        """Gather one event of a streamed sync; at the closing bookmark, sync (True)."""
        kind = event.get("type")
        raw = event.get("object") or {}
        if kind == "ERROR":
            raise errors.api_error(int(raw.get("code") or 500), raw)
        if kind == "BOOKMARK":
            annotations = (raw.get("metadata") or {}).get("annotations") or {}
            if annotations.get(INITIAL_EVENTS_END) != "true":
                return False
            self.streamed_syncs += 1
            self._synced(list(initial.values()), _resource_version(raw))
            return True
        obj = self._decode_unless_stored(raw)
        if obj is None or kind == "DELETED":
            initial.pop(_key_of(raw), None)
        else:
            initial[objects.object_key(obj)] = obj
        return False

    def _handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        raw = event.get("object") or {}
        if kind == "ERROR":
            code = int(raw.get("code") or 500)
            raise errors.api_error(code, raw)
        if kind == "BOOKMARK":
            self.resource_version = _resource_version(raw) or self.resource_version
            return
        obj = self._decode(raw)
        if obj is None:
            self._forget(raw)
        elif kind == "DELETED":
            self._store.delete(objects.object_key(obj))
            self._sink.on_delete(obj)
        else:
            old = self._store.upsert(obj)
            if old is None:
                self._sink.on_add(obj)
            else:
                self._sink.on_update(old, obj)
        self.resource_version = _resource_version(raw) or self.resource_version

    def _forget(self, raw: dict[str, Any]) -> None:
        """An object that was skipped is absent: its stored version leaves as a delete."""
        old = self._store.delete(_key_of(raw))
        if old is not None:
            self._sink.on_delete(old)

    def _current_selection(self) -> tuple[dict[str, str], int]:
        """The query parameters of the selection now, and its generation."""
        with self._lock:
            return dict(self._selection), self.generation

    def _decode_unless_stored(self, raw: dict[str, Any]) -> objects.Obj | None:
        """The stored object when ``raw`` is the same version of it, else ``raw`` decoded.

        A sync streams or lists every object again (a relist after 410, a sharded
        member's reselection, which repeats every Job it keeps). A resourceVersion names
        one version of one object, so the stored copy is that object already: reusing
        it skips the transform and the freeze, and the sync never holds a second copy
        of the store (a reselection of 30,000 cached Jobs used to).
        """
        version = _resource_version(raw)
        stored = self._store.get(objects.object_key(raw)) if version else None
        if stored is not None and _resource_version(stored) == version:
            return stored
        return self._decode(raw)

    def _decode(self, raw: dict[str, Any]) -> objects.Obj | None:
        """``raw`` transformed and frozen; None if that fails (it is skipped: module doc)."""
        if self._metadata_only:  # a PartialObjectMetadata, stored as the kind it is of
            raw["apiVersion"], raw["kind"] = self._kind.api_version, self._kind.kind
        raw.setdefault("apiVersion", self._kind.api_version)
        raw.setdefault("kind", self._kind.kind)
        try:
            return objects.freeze(self._transform(raw))  # type: ignore[no-any-return]
        except Exception as exc:  # one object must not stop the informer: skip it
            self._skip(raw, exc)
            return None

    def _skip(self, raw: dict[str, Any], exc: Exception) -> None:
        """Log, count and report an object that cannot be cached (module doc)."""
        log.error(
            "%s %s: cannot cache this object, skipping it until it changes: %s: %s",
            self._kind,
            _key_of(raw),
            type(exc).__name__,
            exc,
        )
        self._skipped.inc()
        if self._on_skip is not None:
            self._on_skip(_reference_to(self._kind, raw), exc)


def _selection(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    """The query parameters that make the API server filter the list and the watch."""
    selection = {"labelSelector": label_selector, "fieldSelector": field_selector}
    return {name: value for name, value in selection.items() if value}


def _metadata_of(raw: objects.Obj) -> objects.Obj:
    metadata = raw.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _key_of(raw: objects.Obj) -> str:
    """The store key of an object as sent, whatever else it holds."""
    metadata = _metadata_of(raw)
    name, namespace = str(metadata.get("name") or ""), str(metadata.get("namespace") or "")
    return f"{namespace}/{name}" if namespace else name


def _reference_to(kind: Kind, raw: objects.Obj) -> objects.Obj:
    """Enough of an object as sent to name it in an event: its kind and identity."""
    metadata = _metadata_of(raw)
    identity = {field: metadata[field] for field in _REFERENCE_FIELDS if field in metadata}
    return objects.freeze({"apiVersion": kind.api_version, "kind": kind.kind, "metadata": identity})  # type: ignore[no-any-return]


def _resource_version(obj: objects.Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
