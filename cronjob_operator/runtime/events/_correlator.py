"""Event aggregation and the spam filter: which Events to create, patch or drop, in memory.

The policy of client-go's EventCorrelator with its defaults, as pure decisions (no I/O;
``events.EventRecorder`` sends what they decide):

* Repeats. Events with the same source, involved object (kind, namespace, name, uid,
  apiVersion), type, reason and message are one Event: the first is created; each repeat
  increments ``count`` and sets ``lastTimestamp`` with a merge PATCH of the existing
  Event (same name, same ``firstTimestamp``). The repeats are remembered in an LRU of
  4096 distinct events, which is the aggregation window.
* Spam filter. Each source + involved object has a token bucket of 25 (``burst``)
  refilled at one token per 300 s (``qps``); every event, new or repeat, takes a token,
  and an event without one is dropped. Like client-go, the key is the object, not the
  reason, so one broken object cannot flood the API server whatever it reports; the
  repeat count still includes the dropped repeats, so the next event that gets through
  carries the true count. Buckets live in an LRU of 4096 objects.
* Not done: client-go's second stage, which merges 10 events of one reason with
  different messages into "(combined from similar events)"; the spam filter bounds them.

``make_event`` builds the Event object (and raises ``ValueError`` for an unknown type or
an object without kind or name).
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from cronjob_operator.runtime import kinds, objects

NORMAL = "Normal"
WARNING = "Warning"
EVENT_TYPES = frozenset({NORMAL, WARNING})
DEFAULT_NAMESPACE = "default"
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
        "message": objects.clipped_message(message),
        "type": type_,
        "source": source,
        "reportingComponent": component,
        "reportingInstance": host,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
