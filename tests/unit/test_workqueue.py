"""The work queue: de-duplication, exclusion, delays, backoff, shutdown and metrics."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

import pytest

from cronjob_operator.runtime import metrics
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RetryLimits,
    WorkQueue,
)

LONG = 10.0
"""A timeout that only a bug can reach; tests never wait for it when things work."""

_names = itertools.count()


def new_queue(clock: Callable[[], float] | None = None) -> WorkQueue[str]:
    """A queue with a name of its own, so its metrics start from zero."""
    name = f"test-{next(_names)}"
    if clock is None:
        return WorkQueue(name, controller="test")
    return WorkQueue(name, clock=clock, controller="test")


def drain(queue: WorkQueue[str]) -> list[str]:
    """Every item ready now, each taken and marked done."""
    items = []
    while (item := queue.get(timeout=0)) is not None:
        items.append(item)
        queue.done(item)
    return items


def start(target: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Run ``target`` on a thread; the list receives its result."""
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(target()), daemon=True)
    thread.start()
    return thread, result


class ClockReaders:
    """A monotonic clock that records which threads read it.

    ``get`` reads the clock with the queue's lock held and releases the lock only by
    sleeping on its condition, so once a getter has read the clock, an ``add`` that
    follows runs while that getter sleeps: a test of a wake-up cannot pass by the getter
    arriving late.
    """

    def __init__(self) -> None:
        self._readers: set[threading.Thread] = set()
        self._read = threading.Condition()

    def __call__(self) -> float:
        with self._read:
            self._readers.add(threading.current_thread())
            self._read.notify_all()
        return time.monotonic()

    def wait_until_read_by(self, thread: threading.Thread) -> None:
        with self._read:
            assert self._read.wait_for(lambda: thread in self._readers, LONG)


class TestDeduplication:
    def test_item_added_twice_is_handed_out_once(self) -> None:
        queue = new_queue()
        queue.add("a")
        queue.add("b")
        queue.add("a")
        assert len(queue) == 2
        assert drain(queue) == ["a", "b"]

    def test_item_added_while_processing_is_processed_again_after_done(self) -> None:
        queue = new_queue()
        queue.add("a")
        assert queue.get(timeout=0) == "a"
        queue.add("a")
        queue.add("a")
        assert len(queue) == 0
        assert queue.get(timeout=0) is None  # not handed to a second worker
        queue.done("a")
        assert queue.get(timeout=0) == "a"
        queue.done("a")
        assert queue.get(timeout=0) is None

    def test_an_item_handed_out_is_in_flight_until_done(self) -> None:
        queue = new_queue()
        queue.add("a")
        queue.add("b")
        assert queue.in_flight() == 0
        assert queue.get(timeout=0) == "a"
        assert (len(queue), queue.in_flight()) == (1, 1)
        assert queue.get(timeout=0) == "b"
        assert (len(queue), queue.in_flight()) == (0, 2), "empty, yet not idle"
        queue.done("a")
        queue.done("b")
        assert queue.in_flight() == 0

    def test_done_of_an_item_not_handed_out_is_ignored(self) -> None:
        queue = new_queue()
        queue.done("a")
        queue.add("a")
        assert drain(queue) == ["a"]

    def test_items_come_out_in_order(self) -> None:
        queue = new_queue()
        for item in "cab":
            queue.add(item)
        assert drain(queue) == ["c", "a", "b"]


def test_an_item_is_never_processed_by_two_workers_at_once() -> None:
    queue = new_queue()
    items = [f"item-{n}" for n in range(5)]
    lock = threading.Lock()
    versions = dict.fromkeys(items, 0)
    processed = dict.fromkeys(items, 0)
    active: set[str] = set()
    overlaps: list[str] = []
    all_processed = threading.Condition(lock)

    def work() -> None:
        while (item := queue.get()) is not None:
            with lock:
                if item in active:
                    overlaps.append(item)
                active.add(item)
                version = versions[item]
            time.sleep(0.0001)  # let other workers run meanwhile
            with lock:
                active.discard(item)
                processed[item] = max(processed[item], version)
                all_processed.notify_all()
            queue.done(item)

    workers = [threading.Thread(target=work, daemon=True) for _ in range(4)]
    for worker in workers:
        worker.start()
    for step in range(2000):
        item = items[step % len(items)]
        with lock:
            versions[item] += 1
        queue.add(item)
        if step % 5 == 0:
            time.sleep(0.0001)  # add while workers hold items, not only before

    with lock:
        # Every item's last add must be processed: nothing is lost by de-duplication.
        assert all_processed.wait_for(lambda: processed == versions, LONG)
    assert queue.shut_down_with_drain(LONG)
    for worker in workers:
        worker.join(LONG)
        assert not worker.is_alive()
    assert overlaps == []


class TestDelays:
    def test_item_is_ready_after_its_delay(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        queue.add_after("a", 5)
        assert len(queue) == 0
        assert queue.get(timeout=0) is None
        clock.advance(4.9)
        assert queue.get(timeout=0) is None
        clock.advance(0.1)
        assert drain(queue) == ["a"]

    @pytest.mark.parametrize("delay", [0, -1])
    def test_no_delay_adds_at_once(self, delay: float) -> None:
        queue = new_queue(FakeClock().monotonic)
        queue.add_after("a", delay)
        assert len(queue) == 1
        assert drain(queue) == ["a"]

    @pytest.mark.parametrize("delay", [0, -1])
    def test_no_delay_is_a_timer_that_came_due_and_goes_before_events(self, delay: float) -> None:
        queue = new_queue(FakeClock().monotonic)
        queue.add("event")
        queue.add_after("timer", delay)
        assert drain(queue) == ["timer", "event"]

    def test_items_due_at_the_same_time_come_out_in_the_order_they_were_added(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        for item in "abcde":
            queue.add_after(item, 1)
        queue.add_after("a", 1)  # the same ready time again keeps a's place
        clock.advance(1)
        assert drain(queue) == list("abcde")

    def test_earlier_ready_time_wins(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        queue.add_after("a", 10)
        queue.add_after("a", 3)
        queue.add_after("a", 20)
        clock.advance(3)
        assert drain(queue) == ["a"]
        clock.advance(100)
        assert drain(queue) == []  # the superseded ready times do not fire

    def test_delayed_items_come_out_by_ready_time(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        queue.add_after("late", 2)
        queue.add_after("early", 1)
        queue.add_after("middle", 1.5)
        clock.advance(2)
        assert drain(queue) == ["early", "middle", "late"]

    def test_delayed_item_already_queued_is_not_duplicated(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        queue.add("a")
        queue.add_after("a", 1)
        clock.advance(1)
        assert drain(queue) == ["a"]

    def test_add_does_not_cancel_a_delayed_add(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        queue.add_after("a", 5)
        queue.add("a")
        assert drain(queue) == ["a"]
        clock.advance(5)
        assert drain(queue) == ["a"]

    def test_many_reschedules_fire_once(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        for delay in range(1000, 0, -1):
            queue.add_after("a", delay)
        queue.add_after("b", 2000)
        clock.advance(1)
        assert drain(queue) == ["a"]
        clock.advance(2000)
        assert drain(queue) == ["b"]

    def test_blocked_get_wakes_when_a_delayed_item_is_due(self) -> None:
        queue = new_queue()
        thread, result = start(lambda: queue.get(timeout=LONG))
        queue.add_after("a", 0.02)
        thread.join(LONG)
        assert result == ["a"]

    def test_a_get_sleeping_until_a_later_timer_wakes_for_an_earlier_one(self) -> None:
        clock = ClockReaders()
        queue = new_queue(clock)
        queue.add_after("late", 1000)
        thread, result = start(lambda: queue.get(timeout=LONG * 3))
        try:
            clock.wait_until_read_by(thread)
            queue.add_after("soon", 0.01)
            thread.join(LONG)
            assert result == ["soon"]
        finally:
            queue.shut_down()

    def test_blocked_getters_pick_up_delayed_items_one_after_another(self) -> None:
        """Two idle workers; the one that takes "a" keeps it: "b" goes to the other."""
        clock = ClockReaders()
        queue = new_queue(clock)
        first, first_result = start(lambda: queue.get(timeout=LONG * 3))
        second, second_result = start(lambda: queue.get(timeout=LONG * 3))
        try:
            clock.wait_until_read_by(first)
            clock.wait_until_read_by(second)
            queue.add_after("a", 0.01)  # wakes one getter, which then watches the heap
            queue.add_after("b", 0.02)  # not the heap's head: wakes nobody
            first.join(LONG)
            second.join(LONG)
            assert sorted(first_result + second_result) == ["a", "b"]  # type: ignore[type-var]
        finally:
            queue.shut_down()

    def test_a_get_with_a_long_timeout_returns_a_delayed_item_when_it_is_due(self) -> None:
        queue = new_queue()
        queue.add_after("a", 0.01)
        thread, result = start(lambda: queue.get(timeout=LONG * 3))
        try:
            thread.join(LONG)
            assert result == ["a"], "get() slept until its own timeout, past the item's"
        finally:
            queue.shut_down()

    def test_blocked_get_wakes_on_add(self) -> None:
        queue = new_queue()
        thread, result = start(lambda: queue.get(timeout=LONG))
        queue.add("a")
        thread.join(LONG)
        assert result == ["a"]

    def test_get_times_out(self) -> None:
        queue = new_queue()
        queue.add_after("a", LONG)
        assert queue.get(timeout=0.01) is None


class TestRateLimiting:
    def test_backoff_doubles_from_5ms_and_caps_at_1000s(self) -> None:
        limiter = ItemExponentialFailureRateLimiter()
        delays = [limiter.when("a") for _ in range(30)]
        assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
        assert delays[17] == pytest.approx(0.005 * 2**17)  # 655 s, still under the cap
        assert delays[18:] == [1000.0] * 12
        assert limiter.num_requeues("a") == 30

    def test_backoff_never_overflows(self) -> None:
        limiter = ItemExponentialFailureRateLimiter(base_delay=1.0, max_delay=float("inf"))
        delays = [limiter.when("a") for _ in range(2000)]
        assert delays == sorted(delays)
        assert delays[-1] == 2.0**1023
        capped = ItemExponentialFailureRateLimiter()
        assert [capped.when("a") for _ in range(2000)][-1] == 1000.0

    def test_items_back_off_independently_and_forget_resets(self) -> None:
        limiter = ItemExponentialFailureRateLimiter()
        limiter.when("a")
        limiter.when("a")
        assert limiter.when("b") == 0.005
        limiter.forget("a")
        assert limiter.num_requeues("a") == 0
        assert limiter.when("a") == 0.005

    def test_add_rate_limited_delays_by_the_backoff(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        queue.add_rate_limited("a")
        assert queue.get(timeout=0) is None
        clock.advance(0.005)
        assert drain(queue) == ["a"]
        queue.add_rate_limited("a")
        clock.advance(0.005)
        assert drain(queue) == []
        clock.advance(0.005)
        assert drain(queue) == ["a"]
        assert queue.num_requeues("a") == 2
        queue.forget("a")
        assert queue.num_requeues("a") == 0

    def test_custom_rate_limiter(self) -> None:
        clock = FakeClock()
        limiter = ItemExponentialFailureRateLimiter(base_delay=1.0, max_delay=2.0)
        queue: WorkQueue[str] = WorkQueue("custom", rate_limiter=limiter, clock=clock.monotonic)
        for _ in range(3):
            queue.add_rate_limited("a")
        clock.advance(1)
        assert drain(queue) == ["a"]
        assert queue.num_requeues("a") == 3


class TestOverallRetryBound:
    """The bucket over all keys that client-go's default controller limiter adds."""

    def test_a_storm_of_failures_is_retried_at_10_a_second_after_a_burst_of_100(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        storm = [f"item-{n}" for n in range(300)]
        for item in storm:
            queue.add_rate_limited(item)
        clock.advance(0.005)
        assert len(drain(queue)) == 100  # the burst; each item's own backoff is 5 ms
        retried = []
        for _ in range(20):
            clock.advance(0.1)
            retried.append(len(drain(queue)))
        assert retried == [1] * 20  # then one every 100 ms, whatever the keys
        clock.advance(18.0)
        assert len(drain(queue)) == 180
        assert len(queue) == 0

    def test_the_larger_delay_wins_and_forget_resets_only_the_key(self) -> None:
        clock = FakeClock()
        limiter = RetryLimits(base_delay=1.0, max_delay=60.0, qps=1.0, burst=2).rate_limiter(
            clock.monotonic
        )
        assert [limiter.when("a") for _ in range(3)] == [1.0, 2.0, 4.0]  # per key, > bucket
        assert limiter.when("b") == 2.0  # 4th token of a 2-burst 1/s bucket: 2 s away
        assert limiter.num_requeues("a") == 3
        limiter.forget("a")
        assert limiter.num_requeues("a") == 0
        clock.advance(10.0)  # the bucket is full again
        assert limiter.when("a") == 1.0

    def test_the_bucket_tracks_no_key(self) -> None:
        bucket = BucketRateLimiter(1.0, 1, clock=FakeClock().monotonic)
        assert (bucket.when("a"), bucket.when("a"), bucket.when("b")) == (0.0, 1.0, 2.0)
        bucket.forget("a")
        assert bucket.num_requeues("a") == 0
        assert MaxOfRateLimiter().when("a") == 0.0


class TestShutdown:
    def test_get_returns_none_after_shutdown(self) -> None:
        queue = new_queue()
        queue.add("a")
        queue.shut_down()
        assert queue.shutting_down
        assert queue.get() is None
        queue.add("b")
        queue.add_after("c", 0)
        queue.add_rate_limited("d")
        assert queue.get(timeout=0) is None

    def test_shutdown_wakes_blocked_getters(self) -> None:
        queue = new_queue()
        threads = [start(queue.get) for _ in range(3)]
        queue.shut_down()
        for thread, result in threads:
            thread.join(LONG)
            assert result == [None]

    def test_drain_waits_for_items_being_processed(self) -> None:
        queue = new_queue()
        queue.add("a")
        queue.add("b")
        assert queue.get() == "a"
        drainer, result = start(queue.shut_down_with_drain)
        drainer.join(0.05)
        assert drainer.is_alive()
        assert queue.get() is None  # no new work while draining
        queue.add("a")
        queue.done("a")
        drainer.join(LONG)
        assert result == [True]
        assert queue.get(timeout=0) is None  # re-added during shutdown: dropped

    def test_drain_gives_up_after_its_timeout(self) -> None:
        queue = new_queue()
        queue.add("a")
        assert queue.get() == "a"
        assert queue.shut_down_with_drain(timeout=0.01) is False
        queue.done("a")
        assert queue.shut_down_with_drain(timeout=0) is True

    def test_drain_of_an_idle_queue_returns_at_once(self) -> None:
        assert new_queue().shut_down_with_drain() is True


def sample(metric: str, queue: WorkQueue[str]) -> float:
    value = metrics.DEFAULT.registry.get_sample_value(
        metric, {"name": queue.name, "controller": "test"}
    )
    assert value is not None, metric
    return value


class TestMetrics:
    def test_adds_depth_and_retries(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        queue.add("a")
        queue.add("a")
        queue.add("b")
        assert sample("workqueue_adds_total", queue) == 2
        assert sample("workqueue_depth", queue) == 2
        queue.add_rate_limited("c")
        assert sample("workqueue_retries_total", queue) == 1
        assert sample("workqueue_depth", queue) == 2
        clock.advance(1)
        assert queue.get() == "c"  # its timer came due: it goes before the events
        assert sample("workqueue_depth", queue) == 2
        assert sample("workqueue_adds_total", queue) == 3

    def test_queue_and_work_durations(self) -> None:
        clock = FakeClock()
        clock.advance(10)  # durations are differences, not readings of the clock
        queue = new_queue(clock.monotonic)
        queue.add("a")
        clock.advance(2)
        assert queue.get() == "a"
        clock.advance(3)
        queue.done("a")
        assert sample("workqueue_queue_duration_seconds_count", queue) == 1
        assert sample("workqueue_queue_duration_seconds_sum", queue) == 2
        assert sample("workqueue_work_duration_seconds_count", queue) == 1
        assert sample("workqueue_work_duration_seconds_sum", queue) == 3

    def test_unfinished_work(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        queue.add("a")
        queue.add("b")
        assert queue.get() == "a"
        clock.advance(1)
        assert queue.get() == "b"
        clock.advance(2)
        queue.update_unfinished_work()
        assert sample("workqueue_unfinished_work_seconds", queue) == 5
        assert sample("workqueue_longest_running_processor_seconds", queue) == 3
        queue.done("a")
        queue.done("b")
        queue.update_unfinished_work()
        assert sample("workqueue_unfinished_work_seconds", queue) == 0
        assert sample("workqueue_longest_running_processor_seconds", queue) == 0


class TestTimersFirst:
    def test_keys_whose_timer_came_due_go_before_event_keys(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        queue.add_after("due-2", 2)
        queue.add_after("due-1", 1)
        queue.add("event-1")
        queue.add("event-2")
        clock.advance(5)
        assert drain(queue) == ["due-1", "due-2", "event-1", "event-2"]

    def test_a_key_queued_by_an_event_moves_up_when_its_timer_comes_due(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        queue.add("event")
        queue.add("both")
        queue.add_after("both", 1)
        clock.advance(1)
        assert drain(queue) == ["both", "event"]
        assert len(queue) == 0

    def test_a_timer_due_while_the_key_is_processed_requeues_it_first(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        queue.add("held")
        assert queue.get(timeout=0) == "held"
        queue.add("event")
        queue.add_after("held", 1)
        clock.advance(1)
        assert queue.get(timeout=0) == "event"  # "held" is still being processed
        queue.done("event")
        queue.done("held")
        assert drain(queue) == ["held"]

    def test_a_key_handed_out_after_its_timer_is_an_event_key_again(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        queue.add_after("timer", 1)
        clock.advance(1)
        assert drain(queue) == ["timer"]
        queue.add("event")
        queue.add("timer")  # an event now: it keeps its place behind the earlier event
        assert drain(queue) == ["event", "timer"]

    def test_a_follow_up_add_goes_behind_every_due_key(self) -> None:
        clock = FakeClock()
        queue = new_queue(clock.monotonic)
        for name in ("a", "b", "c"):
            queue.add_after(name, 1)
        clock.advance(1)
        order = []
        while (item := queue.get(timeout=0)) is not None:
            order.append(item)
            if not item.endswith("-status"):
                queue.add(f"{item}-status")  # what Result(follow_up=True) does
            queue.done(item)
        assert order == ["a", "b", "c", "a-status", "b-status", "c-status"]
