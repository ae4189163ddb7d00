"""The work queue between event handlers and reconcile workers, as client-go's workqueue.

Event handlers add keys; workers ``get`` a key, reconcile it and call ``done``. The queue
gives the guarantees controllers rely on:

* De-duplication: a key added many times before a worker takes it is handed out once.
* Exclusion: a key is never handed to two workers at once. A key added while a worker
  holds it is marked dirty and queued again when the worker calls ``done``.
* Delays: ``add_after`` parks a key in one waiting heap until its ready time; if the key
  is already waiting, the earlier ready time wins. No thread runs the heap: ``get``
  moves due keys to the queue and sleeps on its condition until the next ready time.
  An ``add`` does not cancel a pending delayed add (as in client-go).
* Timers first: a key whose delay came due (``add_after``, so a ``requeue_after`` or a
  retry) is handed out before keys added by ``add`` (events), and a key already queued
  by an event moves up when its timer comes due. Work that was scheduled for a time
  (a CronJob's run) is therefore never stuck behind the status-only work that events
  bring, whatever order the timers fired in. Within each class the order is FIFO.
* Rate limiting: ``add_rate_limited`` delays a key by its rate limiter; ``forget``
  resets the key's backoff. The default is client-go's ``DefaultControllerRateLimiter``
  (controller-runtime's default): the larger of per-key exponential backoff (5 ms
  doubling to 1000 s) and one token bucket over all keys (10 retries a second after a
  burst of 100), so a storm of failures (every request answered 500, say) is retried
  at 10 a second overall, not as fast as the workers can fail. ``RetryLimits`` holds
  the four numbers; the bucket runs on the queue's ``clock``.
* Shutdown: ``shut_down`` makes every ``get`` return None at once, including blocked
  ones; keys still queued are dropped (unlike client-go, which hands them out first:
  here a shutdown must finish within the grace period, and a new leader relists
  anyway). ``shut_down_with_drain`` also waits until workers have called ``done`` on
  the keys they hold. Adds after shutdown are ignored.

Ready times and metric durations use the injected ``clock``, so tests can move time by
hand; ``get``'s own ``timeout`` is real time (it is how long the caller blocks).

Metrics (labels ``name`` and ``controller``): depth, adds, retries (one per
``add_rate_limited``), queue duration (add to get) and work duration (get to done) are
updated as things happen. The two stuck-worker gauges, unfinished work and longest
running processor, are set by ``update_unfinished_work``, which the controller calls
periodically (client-go does it every 500 ms).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from cronjob_operator.runtime.client import TokenBucket
from cronjob_operator.runtime.metrics import DEFAULT, Metrics

T = TypeVar("T", bound=Hashable)

BASE_DELAY = 0.005
"""client-go's per-item backoff: the first retry of a key waits 5 ms, doubling per failure."""
MAX_DELAY = 1000.0
"""client-go's cap of the per-item backoff."""

_MAX_EXPONENT = 1023
"""2.0 ** 1024 overflows a float; beyond this the delay is capped anyway."""


class RateLimiter(Protocol):
    """Decides how long a key waits before its next retry."""

    def when(self, item: Hashable) -> float:
        """The delay (seconds) before ``item`` is retried; counts one more failure."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking ``item``: its next failure starts from the base delay."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """How many failures of ``item`` are being tracked."""
        ...


class ItemExponentialFailureRateLimiter:
    """Per-key exponential backoff: ``base_delay * 2**failures``, capped at ``max_delay``."""

    def __init__(self, base_delay: float = BASE_DELAY, max_delay: float = MAX_DELAY) -> None:
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            exponent = self._failures.get(item, 0)
            self._failures[item] = exponent + 1
        # A float product never raises: it becomes inf at worst, which the cap handles.
        return min(self._base_delay * 2.0 ** min(exponent, _MAX_EXPONENT), self._max_delay)

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)


class BucketRateLimiter:
    """One token bucket over every key (client-go's ``BucketRateLimiter``).

    Each retry of any key takes a token, possibly one not yet earned; the delay is the
    wait until that token is due. It tracks no key: ``forget`` does nothing.
    """

    def __init__(
        self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._bucket = TokenBucket(qps, burst, clock=clock)

    def when(self, item: Hashable) -> float:
        return self._bucket.reserve()

    def forget(self, item: Hashable) -> None:
        """Nothing to forget: the bucket is shared by every key."""

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The largest delay of several limiters (client-go's ``MaxOfRateLimiter``).

    Every limiter is asked each time, so each counts every failure.
    """

    def __init__(self, *limiters: RateLimiter) -> None:
        self._limiters = limiters

    def when(self, item: Hashable) -> float:
        return max((limiter.when(item) for limiter in self._limiters), default=0.0)

    def forget(self, item: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max((limiter.num_requeues(item) for limiter in self._limiters), default=0)


@dataclass(frozen=True, slots=True)
class RetryLimits:
    """How fast failed keys are retried; the defaults are controller-runtime's
    (client-go's ``DefaultControllerRateLimiter``)."""

    base_delay: float = BASE_DELAY
    """The first retry of a key waits this long; each further failure doubles it."""
    max_delay: float = MAX_DELAY
    """The per-key backoff stops growing here."""
    qps: float = 10.0
    """Retries per second over all keys, once the burst is spent."""
    burst: int = 100
    """Retries over all keys that may go at once."""

    def rate_limiter(self, clock: Callable[[], float] = time.monotonic) -> RateLimiter:
        """The larger of per-key exponential backoff and the overall bucket."""
        return MaxOfRateLimiter(
            ItemExponentialFailureRateLimiter(self.base_delay, self.max_delay),
            BucketRateLimiter(self.qps, self.burst, clock=clock),
        )


class _Waiting(Generic[T]):
    """An entry of the waiting heap; ordered by ready time, then by insertion."""

    __slots__ = ("item", "ready_at", "seq")

    def __init__(self, ready_at: float, seq: int, item: T) -> None:
        self.ready_at = ready_at
        self.seq = seq
        self.item = item

    def __lt__(self, other: _Waiting[T]) -> bool:
        return (self.ready_at, self.seq) < (other.ready_at, other.seq)


class WorkQueue(Generic[T]):
    """A de-duplicating, delaying, rate-limited queue of hashable keys. Thread-safe."""

    def __init__(
        self,
        name: str = "",
        *,
        rate_limiter: RateLimiter | None = None,
        clock: Callable[[], float] = time.monotonic,
        controller: str = "",
        metrics: Metrics | None = None,
    ) -> None:
        self.name = name
        self._rate_limiter = rate_limiter or RetryLimits().rate_limiter(clock)
        self._clock = clock
        lock = threading.Lock()
        self._ready = threading.Condition(lock)
        """Notified when a key may be ready for ``get`` (or the next ready time moved)."""
        self._idle = threading.Condition(lock)
        """Notified when the last key being processed is done."""
        self._queue: deque[T] = deque()
        self._due_queue: deque[T] = deque()
        """Keys whose timer came due; served before ``_queue``. Both may hold stale
        entries (a key moved up, or already handed out): ``_queued`` says which count."""
        self._queued: set[T] = set()
        self._due: set[T] = set()
        """Keys that go to ``_due_queue`` when queued (set while a worker holds them)."""
        self._dirty: set[T] = set()
        self._processing: dict[T, float] = {}
        self._added_at: dict[T, float] = {}
        self._heap: list[_Waiting[T]] = []
        self._waiting: dict[T, _Waiting[T]] = {}
        self._seq = itertools.count()
        self._shutting_down = False

        labels = {"name": name, "controller": controller}
        m = metrics or DEFAULT
        self._depth = m.workqueue_depth.labels(**labels)
        self._adds = m.workqueue_adds.labels(**labels)
        self._retries = m.workqueue_retries.labels(**labels)
        self._queue_duration = m.workqueue_queue_duration.labels(**labels)
        self._work_duration = m.workqueue_work_duration.labels(**labels)
        self._unfinished_work = m.workqueue_unfinished_work.labels(**labels)
        self._longest_running = m.workqueue_longest_running.labels(**labels)

    def add(self, item: T) -> None:
        """Queue ``item`` unless it is already queued; never blocks."""
        with self._ready:
            if not self._shutting_down:
                self._add_locked(item, self._clock())

    def add_after(self, item: T, delay: float) -> None:
        """Queue ``item`` after ``delay`` seconds (now if ``delay <= 0``); never blocks.

        If ``item`` is already waiting, it keeps whichever ready time is earlier.
        """
        with self._ready:
            if self._shutting_down:
                return
            now = self._clock()
            if delay <= 0:
                self._add_locked(item, now, due=True)
                return
            ready_at = now + delay
            waiting = self._waiting.get(item)
            if waiting is not None and waiting.ready_at <= ready_at:
                return
            entry = _Waiting(ready_at, next(self._seq), item)
            self._waiting[item] = entry
            heapq.heappush(self._heap, entry)
            if len(self._heap) > 2 * len(self._waiting) + 64:
                self._compact_heap()
            if self._heap[0] is entry:
                self._ready.notify()  # a sleeping get() must wake sooner

    def add_rate_limited(self, item: T) -> None:
        """Queue ``item`` after its rate limiter's delay, and count a retry."""
        delay = self._rate_limiter.when(item)
        self._retries.inc()
        self.add_after(item, delay)

    def forget(self, item: T) -> None:
        """Reset ``item``'s backoff (call it when the item was processed successfully)."""
        self._rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many rate-limited retries ``item`` has had since it was last forgotten."""
        return self._rate_limiter.num_requeues(item)

    def get(self, timeout: float | None = None) -> T | None:
        """Take the next ready item; the caller must call ``done`` with it afterwards.

        Blocks until an item is ready, for at most ``timeout`` seconds (forever if None).
        Returns None on timeout, or as soon as the queue is shutting down.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ready:
            while True:
                if self._shutting_down:
                    return None
                now = self._clock()
                self._promote_due(now)
                if self._queued:
                    break
                wait = self._heap[0].ready_at - now if self._heap else None
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        if self._heap:
                            self._ready.notify()  # hand the heap's timing to another getter
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._ready.wait(wait)
            item = self._pop_locked()
            self._dirty.discard(item)
            self._processing[item] = now
            self._queue_duration.observe(now - self._added_at.pop(item, now))
            self._depth.set(len(self._queued))
            if self._queued or self._heap:
                self._ready.notify()  # another getter takes the rest or watches the heap
            return item

    def done(self, item: T) -> None:
        """Mark ``item`` processed; queue it again if it was added meanwhile."""
        with self._ready:
            started = self._processing.pop(item, None)
            if started is None:
                return
            self._work_duration.observe(self._clock() - started)
            if item in self._dirty and not self._shutting_down:
                self._enqueue_locked(item)
            if not self._processing:
                self._idle.notify_all()

    def shut_down(self) -> None:
        """Stop handing out items: every ``get``, blocked or not, returns None from now on."""
        with self._ready:
            self._shutting_down = True
            self._ready.notify_all()

    def shut_down_with_drain(self, timeout: float | None = None) -> bool:
        """Shut down, then block until every item handed out is ``done``.

        Waits at most ``timeout`` seconds (forever if None); returns False if items were
        still being processed when it gave up.
        """
        with self._ready:
            self._shutting_down = True
            self._ready.notify_all()
            return self._idle.wait_for(lambda: not self._processing, timeout)

    def update_unfinished_work(self) -> None:
        """Set the unfinished-work and longest-running-processor gauges from the clock."""
        with self._ready:
            now = self._clock()
            running = [now - started for started in self._processing.values()]
        self._unfinished_work.set(sum(running))
        self._longest_running.set(max(running, default=0.0))

    @property
    def shutting_down(self) -> bool:
        """True once ``shut_down`` or ``shut_down_with_drain`` was called."""
        return self._shutting_down

    def in_flight(self) -> int:
        """The number of items handed out by ``get`` and not yet ``done``."""
        with self._ready:
            return len(self._processing)

    def __len__(self) -> int:
        """The number of items ready to be handed out (the depth)."""
        return len(self._queued)

    def _add_locked(self, item: T, now: float, *, due: bool = False) -> None:
        if due and item not in self._due:
            self._due.add(item)
            if item in self._queued:
                self._due_queue.append(item)  # moves up; its old entry is now stale
        if item in self._dirty:
            return
        self._dirty.add(item)
        self._added_at[item] = now
        self._adds.inc()
        if item in self._processing:
            return  # done() queues it again
        self._enqueue_locked(item)

    def _enqueue_locked(self, item: T) -> None:
        self._queued.add(item)
        (self._due_queue if item in self._due else self._queue).append(item)
        self._depth.set(len(self._queued))
        self._ready.notify()

    def _pop_locked(self) -> T:
        """The next queued key: timers that came due first, then events; skips stale entries."""
        for line in (self._due_queue, self._queue):
            while line:
                item = line.popleft()
                if item in self._queued:
                    self._queued.discard(item)
                    self._due.discard(item)
                    return item
        raise AssertionError("_pop_locked called with nothing queued")

    def _promote_due(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0].ready_at <= now:
            entry = heapq.heappop(heap)
            if self._waiting.get(entry.item) is entry:
                del self._waiting[entry.item]
                self._add_locked(entry.item, now, due=True)

    def _compact_heap(self) -> None:
        self._heap = [entry for entry in self._heap if self._waiting.get(entry.item) is entry]
        heapq.heapify(self._heap)
