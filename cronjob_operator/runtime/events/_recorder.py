"""Kubernetes Events (core/v1) for users to read: the recorder, off the caller's thread.

Reconcilers call ``EventRecorder.event(obj, type_, reason, message)``. It never raises and
never waits for the API server: it builds the Event, asks the correlator (``_correlator``:
client-go's aggregation of repeats and its per-object spam filter, in memory, under a
lock) whether it is new, a repeat or spam, and puts the resulting write on a bounded queue
(1000 writes) that one background thread sends. A full queue drops the event (counted,
logged). ``start`` starts the sender; ``stop`` stops intake, sends what is queued (up to
``timeout``) and returns; events recorded before ``start`` wait in the queue. In a
manager, the recorder is a Runnable on every replica (``run(stop)``).

Errors: ``event`` logs and drops an event it cannot build (an unknown type, an object
without kind or name). A write that fails (after the REST client's own retries of
transient failures) is logged and dropped; AlreadyExists and a terminating namespace are
expected and logged at debug. If a repeat's Event is gone (NotFound, e.g. the API
server's 1 h event TTL removed it), it is created again under its name with the running
count. Events are best effort, as in client-go.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from cronjob_operator.runtime import errors, kinds, objects
from cronjob_operator.runtime.client import ObjectWriter
from cronjob_operator.runtime.events._correlator import (
    DEFAULT_BURST,
    DEFAULT_QPS,
    EventCorrelator,
    EventWrite,
    make_event,
    utc_now,
)
from cronjob_operator.runtime.runnable import run_between

log = logging.getLogger(__name__)

QUEUE_SIZE = 1000


class Recorder(Protocol):
    """What a reconciler asks of an event recorder (client-go's ``record.EventRecorder``):
    ``EventRecorder`` sends them, ``fake.FakeRecorder`` keeps them for a test."""

    def event(self, obj: objects.Obj, type_: str, reason: str, message: str) -> None:
        """Record an Event of ``type_`` (Normal or Warning) about ``obj``; never raises."""
        ...


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
        writer: ObjectWriter,
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
        run_between(stop, self.start, self.stop)

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
            if errors.has_status_cause(exc, errors.NAMESPACE_TERMINATING_CAUSE):
                log.debug("event %s not written: its namespace is terminating", where)
            else:
                log.warning("event %s not written: %s", where, exc)
        except errors.TransportError as exc:
            self._count("failed")
            log.warning("event %s not written: %s", where, exc)
