"""Kubernetes Events (core/v1) for users to read, with client-go's aggregation and spam filter.

Reconcilers call ``EventRecorder.event(obj, type_, reason, message)``. It never raises and
never waits for the API server: it builds the Event, decides (under a lock, in memory)
whether it is new, a repeat or spam, and puts the resulting write on a bounded queue
(1000 writes) that one background thread sends. A full queue drops the event (counted,
logged). ``start`` starts the sender; ``stop`` stops intake, sends what is queued (up to
``timeout``) and returns; events recorded before ``start`` wait in the queue.

The policy, as client-go's EventCorrelator with its defaults:

* Repeats. Events with the same source, involved object (kind, namespace, name, uid,
  apiVersion), type, reason and message are one Event: the first is created; each repeat
  increments ``count`` and sets ``lastTimestamp`` with a merge PATCH of the existing
  Event (same name, same ``firstTimestamp``). The repeats are remembered in an LRU of
  4096 distinct events, which is the aggregation window. If the Event is gone (NotFound,
  e.g. the API server's 1 h event TTL removed it), it is created again under its name with
  the running count.
* Spam filter. Each source + involved object has a token bucket of 25 (``burst``)
  refilled at one token per 300 s (``qps``); every event, new or repeat, takes a token,
  and an event without one is dropped (counted, logged at debug). Like client-go, the
  key is the object, not the reason, so one broken object cannot flood the API server
  whatever it reports; the repeat count still includes the dropped repeats, so the next
  event that gets through carries the true count. Buckets live in an LRU of 4096 objects.
* Not done: client-go's second stage, which merges 10 events of one reason with
  different messages into "(combined from similar events)"; the spam filter bounds them.

Errors: ``event`` logs and drops an event it cannot build (an unknown type, an object
without kind or name). A write that fails (after the REST client's own retries of
transient failures) is logged and dropped; AlreadyExists and a terminating namespace are
expected and logged at debug. Events are best effort, as in client-go.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar

from cronjob_operator.runtime import errors, kinds, objects
from cronjob_operator.runtime.client import PatchType

__all__ = [
    "NORMAL",
    "WARNING",
    "EventCorrelator",
    "EventRecorder",
    "EventSink",
    "EventWrite",
    "RecorderStats",
    "SpamFilter",
    "format_time",
    "make_event",
    "utc_now",
]

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
EVENT_TYPES = frozenset({NORMAL, WARNING})
MAX_MESSAGE_LENGTH = 1024
DEFAULT_NAMESPACE = "default"
QUEUE_SIZE = 1000
LRU_SIZE = 4096
DEFAULT_BURST = 25
DEFAULT_QPS = 1.0 / 300.0
_MAX_NAME_LENGTH = 253

K = TypeVar("K")
V = TypeVar("V")


def utc_now() -> datetime:
    """The current time, timezone-aware in UTC."""
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """A metav1.Time: RFC 3339 in UTC, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventSink(Protocol):
    """Where Events are written: ``client.Writer`` (or a test double)."""

    def create(self, kind: kinds.Kind, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    def patch(
        self,
        kind: kinds.Kind,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str = "",
    ) -> dict[str, Any]: ...


class _LRU(Generic[K, V]):
    """A bounded mapping that forgets the least recently used key."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self._size:
            self._items.popitem(last=False)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: datetime


class SpamFilter:
    """Per-key token buckets: ``burst`` tokens, refilled at ``qps`` tokens per second."""

    def __init__(self, *, burst: int = DEFAULT_BURST, qps: float = DEFAULT_QPS) -> None:
        self._burst = burst
        self._qps = qps
        self._buckets: _LRU[tuple[str, ...], _Bucket] = _LRU(LRU_SIZE)

    def allow(self, key: tuple[str, ...], now: datetime) -> bool:
        """Take a token for ``key`` if one is left; False means drop the event."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(float(self._burst), now)
        else:
            elapsed = max(0.0, (now - bucket.updated).total_seconds())
            bucket.tokens = min(float(self._burst), bucket.tokens + elapsed * self._qps)
            bucket.updated = now
        self._buckets.put(key, bucket)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True


@dataclass(frozen=True, slots=True)
class EventWrite:
    """What to send for one event: ``patch`` the existing Event, else create ``event``."""

    event: dict[str, Any]
    patch: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class _Seen:
    name: str
    count: int
    first_timestamp: str


def _event_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    return (*_spam_key(event), event["type"], event["reason"], event["message"])


def _spam_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    source = event["source"]
    ref = event["involvedObject"]
    return (
        source.get("component", ""),
        source.get("host", ""),
        ref.get("kind", ""),
        ref.get("namespace", ""),
        ref.get("name", ""),
        ref.get("uid", ""),
        ref.get("apiVersion", ""),
    )


class EventCorrelator:
    """Turns events into writes: repeats become patches, spam becomes nothing.

    Not thread-safe; the recorder calls it under its lock.
    """

    def __init__(self, *, burst: int = DEFAULT_BURST, qps: float = DEFAULT_QPS) -> None:
        self._seen: _LRU[tuple[str, ...], _Seen] = _LRU(LRU_SIZE)
        self._spam = SpamFilter(burst=burst, qps=qps)

    def correlate(self, event: dict[str, Any], now: datetime) -> EventWrite | None:
        """The write for ``event`` (updated in place if it repeats one), or None if spam."""
        key = _event_key(event)
        seen = self._seen.get(key)
        patch: dict[str, Any] | None = None
        if seen is not None:
            event["metadata"]["name"] = seen.name
            event["count"] = seen.count + 1
            event["firstTimestamp"] = seen.first_timestamp
            patch = {"count": event["count"], "lastTimestamp": event["lastTimestamp"]}
        self._seen.put(
            key, _Seen(event["metadata"]["name"], event["count"], event["firstTimestamp"])
        )
        if not self._spam.allow(_spam_key(event), now):
            return None
        return EventWrite(event, patch)


def make_event(
    obj: objects.Obj,
    type_: str,
    reason: str,
    message: str,
    *,
    component: str,
    host: str,
    now: datetime,
) -> dict[str, Any]:
    """A new core/v1 Event about ``obj`` (count 1); ValueError if it cannot be built."""
    if type_ not in EVENT_TYPES:
        raise ValueError(f"unsupported event type {type_!r}: use {NORMAL!r} or {WARNING!r}")
    metadata = obj.get("metadata") or {}
    name = str(metadata.get("name") or "")
    api_version = str(obj.get("apiVersion") or "")
    kind = str(obj.get("kind") or "")
    if not name or not kind or not api_version:
        raise ValueError("the object needs apiVersion, kind and metadata.name")
    namespace = str(metadata.get("namespace") or "")
    ref: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "name": name}
    if namespace:
        ref["namespace"] = namespace
    for field_name in ("uid", "resourceVersion"):
        if metadata.get(field_name):
            ref[field_name] = str(metadata[field_name])
    suffix = secrets.token_hex(8)
    stamp = format_time(now)
    source = {"component": component, "host": host} if host else {"component": component}
    return {
        "apiVersion": kinds.EVENT.api_version,
        "kind": kinds.EVENT.kind,
        "metadata": {
            "name": f"{name[: _MAX_NAME_LENGTH - len(suffix) - 1]}.{suffix}",
            "namespace": namespace or DEFAULT_NAMESPACE,
        },
        "involvedObject": ref,
        "reason": reason,
        "message": message[:MAX_MESSAGE_LENGTH],
        "type": type_,
        "source": source,
        "reportingComponent": component,
        "reportingInstance": host,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


@dataclass(frozen=True, slots=True)
class RecorderStats:
    """What happened to recorded events so far."""

    created: int = 0
    patched: int = 0
    spam_filtered: int = 0
    queue_full: int = 0
    invalid: int = 0
    failed: int = 0


class EventRecorder:
    """Records Events about objects, off the caller's thread (see the module doc)."""

    def __init__(
        self,
        writer: EventSink,
        *,
        component: str,
        host: str = "",
        clock: Callable[[], datetime] = utc_now,
        burst: int = DEFAULT_BURST,
        qps: float = DEFAULT_QPS,
        queue_size: int = QUEUE_SIZE,
    ) -> None:
        self._sink = writer
        self._component = component
        self._host = host
        self._clock = clock
        self._correlator = EventCorrelator(burst=burst, qps=qps)
        self._lock = threading.Lock()
        self._queue: queue.Queue[EventWrite | None] = queue.Queue(maxsize=queue_size)
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._dropping = False
        self._counts = {field.name: 0 for field in dataclasses.fields(RecorderStats)}

    def stats(self) -> RecorderStats:
        """Counts of created, patched and dropped events."""
        with self._lock:
            return RecorderStats(**self._counts)

    def event(self, obj: objects.Obj, type_: str, reason: str, message: str) -> None:
        """Record an event about ``obj``; never raises, never waits for the API server."""
        try:
            self._record(obj, type_, reason, message)
        except Exception:
            log.exception("recording event %s failed", reason)

    needs_leader_election = False
    """A manager Runnable on every replica: followers record events too."""

    def run(self, stop: threading.Event) -> None:
        """Send events until ``stop`` is set, then flush what is queued (the Runnable entry)."""
        self.start()
        stop.wait()
        self.stop()

    def start(self) -> None:
        """Start the sender thread (idempotent)."""
        with self._lock:
            if self._thread is not None or self._stopped:
                return
            self._thread = threading.Thread(
                target=self._send_loop, name="event-recorder", daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop intake and send what is queued, waiting up to ``timeout`` seconds."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            thread = self._thread
        if thread is None:
            log.debug(
                "event recorder stopped before it started; %d events dropped", self._queue.qsize()
            )
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            log.warning("event recorder did not drain its queue within %.1fs", timeout)
            return
        thread.join(timeout)
        if thread.is_alive():
            log.warning(
                "event recorder did not send %d events within %.1fs", self._queue.qsize(), timeout
            )

    def _record(self, obj: objects.Obj, type_: str, reason: str, message: str) -> None:
        now = self._clock()
        try:
            event = make_event(
                obj, type_, reason, message, component=self._component, host=self._host, now=now
            )
        except ValueError as exc:
            self._count("invalid")
            log.error("dropping event %s for %s: %s", reason, objects.object_key(obj), exc)
            return
        with self._lock:
            if self._stopped:
                log.debug("event recorder stopped; dropping event %s", reason)
                return
            write = self._correlator.correlate(event, now)
            if write is None:
                self._counts["spam_filtered"] += 1
                log.debug("spam filter dropped event %s for %s", reason, objects.object_key(obj))
                return
            try:
                self._queue.put_nowait(write)
            except queue.Full:
                self._counts["queue_full"] += 1
                if not self._dropping:
                    log.warning("event queue is full; dropping events until it drains")
                self._dropping = True
                return
            self._dropping = False

    def _count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    def _send_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._send(item)
            except Exception:
                self._count("failed")
                log.exception("sending an event failed")

    def _send(self, write: EventWrite) -> None:
        event = write.event
        name = event["metadata"]["name"]
        namespace = event["metadata"]["namespace"]
        where = f"{namespace}/{name} ({event['reason']})"
        try:
            if write.patch is not None:
                try:
                    self._sink.patch(kinds.EVENT, name, write.patch, namespace=namespace)
                    self._count("patched")
                    return
                except errors.NotFound:
                    log.debug("event %s is gone; creating it again", where)
            self._sink.create(kinds.EVENT, event)
            self._count("created")
        except errors.AlreadyExists:
            log.debug("event %s already exists", where)
        except errors.ApiError as exc:
            self._count("failed")
            if _namespace_terminating(exc):
                log.debug("event %s not written: its namespace is terminating", where)
            else:
                log.warning("event %s not written: %s", where, exc)
        except errors.TransportError as exc:
            self._count("failed")
            log.warning("event %s not written: %s", where, exc)


def _namespace_terminating(error: errors.ApiError) -> bool:
    causes = (error.status.get("details") or {}).get("causes") or []
    return any(cause.get("reason") == "NamespaceTerminating" for cause in causes)
