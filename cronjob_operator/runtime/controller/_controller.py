"""The controller: a work queue of requests, the watches that fill it, and workers.

A ``Controller`` is what controller-runtime's builder produces. Watches (added with
``watch``, each on a ``Source``) turn events into ``Request``s on a de-duplicating, rate-limited
queue; ``max_concurrent_reconciles`` worker threads take requests and call the
reconciler. The queue guarantees one object is never reconciled by two workers at once.

What a reconcile's outcome does (controller-runtime's ``reconcileHandler``, with the
differences named):
* ``errors.ApiError`` or ``errors.TransportError`` (deadlines and refused writes
  included) -> counted as an error and requeued with the queue's rate limiter
  (``RetryLimits``: per-item exponential backoff, 5 ms doubling to 1000 s, and at most
  10 retries a second over all items after a burst of 100): Python's analogue of a
  returned ``error``;
* any other exception -> the same, and also counted in
  ``controller_runtime_reconcile_panics_total``: the analogue of a recovered panic
  (controller-runtime's ``RecoverPanic``, on by default);
* a ``TerminalError`` -> counted as an error, not requeued;
* ``Result(requeue_after=s)`` with s > 0 -> the backoff is forgotten and the request
  comes back after s seconds (a timer: the queue hands it out before event-driven keys);
* ``Result(follow_up=True)`` -> the backoff is forgotten and the request is queued
  again at once, behind the timers that came due (counted as ``requeue``). Unlike
  controller-runtime's ``Requeue: true``, which re-adds with the rate limiter's backoff,
  and unlike its precedence, ``follow_up`` wins over ``requeue_after``;
* otherwise the backoff is forgotten and the request is done until the next event.
Every result series (success, error, requeue, requeue_after) exists from the start.
An exception never kills a worker. ``start`` returns at once; ``stop`` stops intake and
waits for in-flight reconciles to finish (up to a timeout). As a manager Runnable (it
needs the lease), ``run(stop)`` starts, waits for ``stop`` and drains.

Each reconcile runs in ``base_context`` (the manager's leader context), with a deadline
when there is a ``reconcile_timeout``, so its REST calls give up (``DeadlineExceeded``,
retried with backoff) instead of hanging. Unlike controller-runtime, where SIGTERM
cancels the context of reconciles in flight, the manager cancels it only when the Lease
is lost or the graceful shutdown timeout has passed: on SIGTERM the reconciles in
flight finish their writes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge, Histogram

from cronjob_operator.runtime import context, errors
from cronjob_operator.runtime.controller._handlers import EnqueueHandler, MapFunc
from cronjob_operator.runtime.controller._predicates import Predicate
from cronjob_operator.runtime.controller._reconcile import (
    Reconciler,
    Request,
    Result,
    TerminalError,
)
from cronjob_operator.runtime.controller._source import Source
from cronjob_operator.runtime.controller._workqueue import RateLimiter, RetryLimits, WorkQueue
from cronjob_operator.runtime.logs import reconcile_scope
from cronjob_operator.runtime.metrics import DEFAULT, Metrics

# The result label values of controller_runtime_reconcile_total this controller reports.
_RESULTS = ("success", "error", "requeue", "requeue_after")

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    """A controller's knobs that a manager sets for all of them (the builder may override)."""

    max_concurrent_reconciles: int = 1
    drain_timeout: float = 30.0
    reconcile_timeout: float | None = None
    base_context: context.Context = context.BACKGROUND
    """What every reconcile runs under (the manager's leader context)."""
    retry_limits: RetryLimits = field(default_factory=RetryLimits)
    """How fast failed requests are retried (controller-runtime's defaults)."""


class Controller:
    """Runs ``reconciler`` for every request its watches enqueue."""

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        *,
        max_concurrent_reconciles: int = 1,
        rate_limiter: RateLimiter | None = None,
        metrics: Metrics | None = None,
        drain_timeout: float = 30.0,
        reconcile_timeout: float | None = None,
        base_context: context.Context = context.BACKGROUND,
    ) -> None:
        if max_concurrent_reconciles < 1:
            raise ValueError("max_concurrent_reconciles must be at least 1")
        self.name = name
        self.reconciler = reconciler
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self.drain_timeout = drain_timeout
        self.reconcile_timeout = reconcile_timeout
        self.base_context = base_context
        self._metrics = metrics or DEFAULT
        self.queue: WorkQueue[Request] = WorkQueue(
            name, rate_limiter=rate_limiter, controller=name, metrics=self._metrics
        )
        self._watches: list[tuple[Source, EnqueueHandler]] = []
        self._workers: list[threading.Thread] = []
        self._started = False
        self._running = 0
        self._running_lock = threading.Lock()
        self._busy = threading.Event()
        """Set while a reconcile runs: the stuck-work reporter sleeps on it when idle."""

    def watch(self, source: Source, map_fn: MapFunc, predicates: Sequence[Predicate] = ()) -> None:
        """Enqueue ``map_fn(obj)`` for every event of ``source`` that passes ``predicates``."""
        handler = EnqueueHandler(self.queue, map_fn, predicates)
        self._watches.append((source, handler))
        if self._started:
            source.add_handler(handler)

    @property
    def sources(self) -> list[Source]:
        """The sources this controller watches, in the order they were added."""
        return [source for source, _ in self._watches]

    needs_leader_election = True
    """A manager Runnable for the leader only: two replicas never reconcile at once."""

    def run(self, stop: threading.Event) -> None:
        """Reconcile until ``stop`` is set, then drain for up to ``drain_timeout`` seconds."""
        self.start()
        stop.wait()
        if not self.stop(self.drain_timeout):
            log.warning("controller %s did not drain within %.0fs", self.name, self.drain_timeout)

    def start(self) -> None:
        """Register the watches and start the workers; returns at once."""
        if self._started:
            return
        self._started = True
        for source, handler in self._watches:
            source.add_handler(handler)
        self._metrics.max_concurrent_reconciles.labels(self.name).set(
            self.max_concurrent_reconciles
        )
        self._series = _Series.of(self._metrics, self.name)
        self._series.active_workers.set(0)
        threading.Thread(
            target=self._report_stuck_work, name=f"{self.name}-queue-metrics", daemon=True
        ).start()
        for index in range(self.max_concurrent_reconciles):
            worker = threading.Thread(
                target=self._work, name=f"{self.name}-worker-{index}", daemon=True
            )
            worker.start()
            self._workers.append(worker)
        log.info(
            "controller started",
            extra={"controller": self.name, "workers": self.max_concurrent_reconciles},
        )

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop taking work and wait for in-flight reconciles; False if they overran."""
        drained = self.queue.shut_down_with_drain(timeout)
        self._busy.set()  # the stuck-work reporter wakes and sees the shutdown
        deadline = time.monotonic() + timeout
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        return drained and not any(worker.is_alive() for worker in self._workers)

    def _report_stuck_work(self) -> None:
        # client-go refreshes the unfinished-work gauges every half second; here only
        # while a reconcile runs (the last one to end zeroes them), so an idle controller
        # has no thread that wakes.
        while True:
            self._busy.wait()
            if self.queue.shutting_down:
                return
            self.queue.update_unfinished_work()
            time.sleep(0.5)

    def _work(self) -> None:
        while True:
            request = self.queue.get()
            if request is None:
                return
            self._began()
            try:
                self._process(request)
            finally:
                self._series.active_workers.dec()
                self.queue.done(request)
                self._ended()

    def _began(self) -> None:
        self._series.active_workers.inc()
        with self._running_lock:
            self._running += 1
            self._busy.set()

    def _ended(self) -> None:
        with self._running_lock:
            self._running -= 1
            idle = self._running == 0
            if idle:
                self._busy.clear()
        if idle:
            self.queue.update_unfinished_work()

    def _process(self, request: Request) -> None:
        started = time.monotonic()
        with reconcile_scope(self.name, request.namespace, request.name):
            try:
                with context.scope(self._reconcile_context()):
                    result = self.reconciler.reconcile(request)
            except TerminalError as exc:
                self._count("error")
                log.error("terminal reconcile error, not requeued: %s", exc)
                self.queue.forget(request)
            except (errors.ApiError, errors.TransportError) as exc:
                self._count("error")
                log.warning("reconcile failed, will retry with backoff: %s", exc)
                self.queue.add_rate_limited(request)
            except Exception:
                self._count("error")
                self._series.panics.inc()
                log.exception("reconciler raised, will retry with backoff")
                self.queue.add_rate_limited(request)
            else:
                self._finish(request, result)
            finally:
                self._series.reconcile_time.observe(time.monotonic() - started)

    def _reconcile_context(self) -> context.Context:
        if self.reconcile_timeout is None:
            return self.base_context
        return self.base_context.with_timeout(self.reconcile_timeout)

    def _finish(self, request: Request, result: Result) -> None:
        self.queue.forget(request)
        if result.follow_up:
            self._count("requeue")
            self.queue.add(request)
        elif result.requeue_after > 0:
            self._count("requeue_after")
            self.queue.add_after(request, result.requeue_after)
        else:
            self._count("success")

    def _count(self, result: str) -> None:
        self._series.results[result].inc()
        if result == "error":
            self._series.errors.inc()


@dataclass(frozen=True, slots=True)
class _Series:
    """One controller's labelled metric series, looked up once at start (a label lookup
    takes the metric's lock and builds its key: several per reconcile otherwise). As
    controller-runtime does, every series exists from the start, so a rate or an alert on
    errors reads 0 instead of nothing before the first error."""

    active_workers: Gauge
    reconcile_time: Histogram
    results: Mapping[str, Counter]
    errors: Counter
    panics: Counter

    @classmethod
    def of(cls, metrics: Metrics, name: str) -> _Series:
        return cls(
            metrics.active_workers.labels(name),
            metrics.reconcile_time.labels(name),
            {result: metrics.reconcile_total.labels(name, result) for result in _RESULTS},
            metrics.reconcile_errors.labels(name),
            metrics.reconcile_panics.labels(name),
        )
