"""Controller semantics without a cluster: what each reconcile outcome does to the queue.

The informer side is exercised by driving the controller's event handler directly (the
same object the informer calls); the cluster-backed tests cover real watches.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterator

import pytest

from cronjob_operator.envtest import wait_for
from cronjob_operator.runtime import errors, metrics, objects
from cronjob_operator.runtime.controller import (
    Controller,
    EnqueueHandler,
    ItemExponentialFailureRateLimiter,
    Predicate,
    Request,
    Result,
    TerminalError,
    and_,
    not_,
    or_,
    resource_version_changed,
)
from cronjob_operator.runtime.controller import _handlers as handlers
from cronjob_operator.runtime.kinds import Kind

PARENT = Kind("example.com", "v1", "Parent", "parents")


class Recorder:
    """A reconciler whose behaviour per call is scripted by the test."""

    def __init__(self, script: Callable[[Request, int], Result]) -> None:
        self.calls: list[Request] = []
        self.times: list[float] = []
        """``time.monotonic()`` at the start of each call, in the order of ``calls``."""
        self.script = script
        self.lock = threading.Lock()

    def reconcile(self, request: Request) -> Result:
        with self.lock:
            self.calls.append(request)
            self.times.append(time.monotonic())
            count = self.calls.count(request)
        return self.script(request, count)


class RecordingLimiter(ItemExponentialFailureRateLimiter):
    """The real per-item exponential limiter, recording every delay it hands out."""

    def __init__(self, base_delay: float) -> None:
        super().__init__(base_delay=base_delay, max_delay=1000.0)
        self.delays: list[tuple[Hashable, float]] = []

    def when(self, item: Hashable) -> float:
        delay = super().when(item)
        self.delays.append((item, delay))
        return delay


Start = Callable[..., Controller]
"""``run(reconciler, rate_limiter=None)``: a started controller, stopped after the test."""


_CONTROLLER_NUMBERS = itertools.count()


@pytest.fixture
def run() -> Iterator[Start]:
    started: list[Controller] = []

    def start(reconciler: Recorder, rate_limiter: RecordingLimiter | None = None) -> Controller:
        # Metrics live in one process-wide registry, so a name must never repeat: id() of
        # a collected reconciler can (a later test then read an earlier test's counts).
        name = f"test-{next(_CONTROLLER_NUMBERS)}"
        controller = Controller(name, reconciler, rate_limiter=rate_limiter)
        controller.start()
        started.append(controller)
        return controller

    yield start
    for controller in started:
        controller.stop(5)


def obj(name: str, rv: str = "1", owner: str | None = None) -> objects.Obj:
    meta: dict[str, object] = {"name": name, "namespace": "ns", "resourceVersion": rv}
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "example.com/v1", "kind": "Parent", "name": owner, "controller": True}
        ]
    return objects.freeze({"metadata": meta})


def test_for_owns_and_watches_enqueue_the_right_keys(run: Start) -> None:
    recorder = Recorder(lambda _r, _n: Result())
    controller = run(recorder)
    EnqueueHandler(controller.queue, handlers.for_object).on_add(obj("a"))
    EnqueueHandler(controller.queue, handlers.for_owner(PARENT)).on_add(obj("child", owner="b"))
    EnqueueHandler(controller.queue, handlers.for_owner(PARENT)).on_add(obj("orphan"))
    EnqueueHandler(controller.queue, lambda o: [Request("other", "c")]).on_delete(obj("x"))
    wait_for(lambda: len(recorder.calls) == 3, 5)
    assert set(recorder.calls) == {Request("ns", "a"), Request("ns", "b"), Request("other", "c")}


def test_predicates_filter_resyncs(run: Start) -> None:
    recorder = Recorder(lambda _r, _n: Result())
    controller = run(recorder)
    handler = EnqueueHandler(controller.queue, handlers.for_object, [resource_version_changed()])
    handler.on_update(obj("same"), obj("same"))
    handler.on_update(obj("changed", "1"), obj("changed", "2"))
    wait_for(lambda: recorder.calls == [Request("ns", "changed")], 5)


def test_errors_are_retried_with_backoff_then_forgotten(run: Start) -> None:
    def fail_twice(_request: Request, count: int) -> Result:
        if count <= 2:
            raise errors.ServerError({"message": "boom"}, code=500)
        return Result()

    flaky = Request("ns", "flaky")
    limiter = RecordingLimiter(base_delay=0.1)
    recorder = Recorder(fail_twice)
    controller = run(recorder, limiter)
    controller.queue.add(flaky)
    wait_for(lambda: len(recorder.calls) == 3, 10, message="two retries then success")
    wait_for(lambda: controller.queue.num_requeues(flaky) == 0, 5, message="forgotten")
    assert limiter.delays == [(flaky, 0.1), (flaky, 0.2)], "the delay doubles per failure"
    # Each retry waited at least its delay (a lower bound: the clock cannot run early).
    first, second, third = recorder.times
    assert second - first >= 0.1
    assert third - second >= 0.2


def test_a_raising_reconciler_does_not_kill_its_worker(
    run: Start,
) -> None:
    def explode_once(request: Request, count: int) -> Result:
        if request.name == "bad" and count == 1:
            raise RuntimeError("bug in the reconciler")
        return Result()

    recorder = Recorder(explode_once)
    controller = run(recorder)
    panics_before = metrics.DEFAULT.reconcile_panics.labels(controller.name)._value.get()
    controller.queue.add(Request("ns", "bad"))
    wait_for(lambda: recorder.calls.count(Request("ns", "bad")) == 2, 5, message="retried")
    controller.queue.add(Request("ns", "good"))
    wait_for(lambda: Request("ns", "good") in recorder.calls, 5, message="worker still alive")
    assert (
        metrics.DEFAULT.reconcile_panics.labels(controller.name)._value.get() == panics_before + 1
    )


def test_terminal_errors_are_not_retried(run: Start) -> None:
    def terminal(_request: Request, _count: int) -> Result:
        raise TerminalError("cannot ever work")

    recorder = Recorder(terminal)
    controller = run(recorder)
    controller.queue.add(Request("ns", "doomed"))
    wait_for(lambda: len(recorder.calls) == 1, 5)
    assert controller.queue.num_requeues(Request("ns", "doomed")) == 0
    assert len(controller.queue) == 0


def test_requeue_after_brings_the_request_back(run: Start) -> None:
    limiter = RecordingLimiter(base_delay=0.001)
    recorder = Recorder(lambda _r, count: Result(requeue_after=0.3) if count == 1 else Result())
    controller = run(recorder, limiter)
    controller.queue.add(Request("ns", "later"))
    wait_for(lambda: len(recorder.calls) == 2, 10, message="requeued after the delay")
    first, second = recorder.times
    assert second - first >= 0.3, "not before requeue_after (a lower bound, never flaky)"
    assert limiter.delays == [], "requeue_after is a plain delay, not a rate-limited retry"
    assert controller.queue.num_requeues(Request("ns", "later")) == 0


def test_one_object_is_never_reconciled_twice_at_once() -> None:
    a, b = Request("ns", "a"), Request("ns", "b")
    inside: set[Request] = set()
    overlaps: list[Request] = []
    calls: list[Request] = []
    lock = threading.Lock()
    a_inside, release_a = threading.Event(), threading.Event()

    class Blocking:
        def reconcile(self, request: Request) -> Result:
            with lock:
                if request in inside:
                    overlaps.append(request)
                inside.add(request)
                calls.append(request)
                first_a = calls == [a]
            if first_a:
                a_inside.set()
                release_a.wait(10)
            with lock:
                inside.discard(request)
            return Result()

    controller = Controller("overlap", Blocking(), max_concurrent_reconciles=4)
    controller.start()
    try:
        controller.queue.add(a)
        assert a_inside.wait(10), "the first reconcile of a started"
        for _ in range(3):
            controller.queue.add(a)  # while a is being processed: must wait for it
        controller.queue.add(b)
        wait_for(lambda: calls.count(b) == 1 and b not in inside, 10, message="b done")
        # Other workers are free and b ran beside a; b again, queued after the re-adds of a,
        # is handed out only after a would have been if the queue let a out twice.
        controller.queue.add(b)
        wait_for(lambda: calls.count(b) == 2 and b not in inside, 10, message="b done again")
        assert calls.count(a) == 1, "a was not handed to a second worker while in process"
        release_a.set()
        wait_for(lambda: calls.count(a) == 2 and not inside, 10, message="a once more, after")
        wait_for(lambda: len(controller.queue) == 0, 10)
    finally:
        release_a.set()
        controller.stop(5)
    assert overlaps == []
    assert calls == [a, b, b, a], "the three re-adds of a while in process made one more run"


def sample(name: str, labels: dict[str, str]) -> float | None:
    return metrics.DEFAULT.registry.get_sample_value(name, labels)


@pytest.mark.parametrize(
    "failure",
    [
        errors.TransportError("connection refused"),
        errors.DeadlineExceeded("GET /x: deadline exceeded"),
        errors.NotLeader("POST /x not sent: lease lost"),
        errors.api_error(500, {"message": "etcd timeout"}),
    ],
    ids=["transport", "deadline", "not-leader", "server-error"],
)
def test_api_and_transport_failures_are_errors_not_panics(run: Start, failure: Exception) -> None:
    # Failed before: every exception but ApiError counted as a panic (a refused
    # connection or a deadline made controller_runtime_reconcile_panics_total 1).
    def fail_once(request: Request, count: int) -> Result:
        if count == 1:
            raise failure
        return Result()

    recorder = Recorder(fail_once)
    controller = run(recorder)
    controller.queue.add(Request("ns", "a"))
    wait_for(lambda: len(recorder.calls) == 2, 5, message="retried after the failure")
    labels = {"controller": controller.name}
    assert sample("controller_runtime_reconcile_errors_total", labels) == 1
    assert sample("controller_runtime_reconcile_panics_total", labels) == 0


def test_every_result_series_exists_from_the_start(run: Start) -> None:
    # Failed before: the requeue series was missing (None) until the first requeue.
    controller = run(Recorder(lambda _request, _count: Result()))
    for result in ("success", "error", "requeue", "requeue_after"):
        labels = {"controller": controller.name, "result": result}
        assert sample("controller_runtime_reconcile_total", labels) == 0, result


def _parked(thread_name: str) -> bool:
    """Whether the thread named ``thread_name`` is blocked in a ``threading`` wait (woken
    by an event), not in a poll loop's sleep."""
    thread = next(t for t in threading.enumerate() if t.name == thread_name)
    frame = sys._current_frames().get(thread.ident or 0)
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return "wait" in names


def test_the_stuck_work_reporter_sleeps_while_idle_and_zeroes_the_gauges_when_work_ends(
    run: Start,
) -> None:
    # Failed before: the reporter polled every half second, idle or not, so it was never
    # parked on an event.
    inside, release = threading.Event(), threading.Event()

    def script(_request: Request, _count: int) -> Result:
        inside.set()
        release.wait(10)
        return Result()

    controller = run(Recorder(script))
    reporter = f"{controller.name}-queue-metrics"
    wait_for(lambda: _parked(reporter), 5, message="the idle reporter parked on an event")
    controller.queue.add(Request("ns", "a"))
    assert inside.wait(10)
    labels = {"name": controller.name, "controller": controller.name}
    wait_for(
        lambda: (sample("workqueue_unfinished_work_seconds", labels) or 0) > 0,
        10,
        message="the unfinished work reported while the reconcile runs",
    )
    release.set()
    wait_for(lambda: controller.queue.in_flight() == 0, 10, message="the reconcile done")
    wait_for(
        lambda: sample("workqueue_unfinished_work_seconds", labels) == 0,
        10,
        message="the unfinished work zeroed when the last reconcile ended",
    )
    wait_for(lambda: _parked(reporter), 5, message="the reporter parked again")


def test_for_and_owns_without_predicates_enqueue_inline_and_the_rest_on_a_thread() -> None:
    # Failed before: no handler ran inline (each had a thread and a wake-up per event).
    queue = Controller("inline-test", Recorder(lambda _r, _c: Result())).queue
    changed = resource_version_changed()
    assert EnqueueHandler(queue, handlers.for_object).runs_inline
    assert EnqueueHandler(queue, handlers.for_owner(PARENT)).runs_inline
    assert not EnqueueHandler(queue, handlers.for_object, [changed]).runs_inline
    assert not EnqueueHandler(queue, lambda obj: []).runs_inline


def test_for_with_inline_predicates_only_enqueues_inline() -> None:
    # Failed before: any predicate gave the handler a thread (the status echo filter of
    # the CronJob controller, a dict read, cost a thread wake-up per watch event).
    queue = Controller("inline-test", Recorder(lambda _r, _c: Result())).queue
    cheap = Predicate(update=lambda old, new: True, inline=True)
    assert EnqueueHandler(queue, handlers.for_object, [cheap]).runs_inline
    assert not EnqueueHandler(
        queue, handlers.for_object, [cheap, resource_version_changed()]
    ).runs_inline


def test_a_combination_of_inline_predicates_is_inline() -> None:
    # Failed before: and_/or_/not_ dropped the flag, so combining the status echo skip
    # with another cheap predicate gave the handler a thread again.
    cheap = Predicate(update=lambda old, new: True, inline=True)
    assert and_(cheap, cheap).inline
    assert or_(cheap, cheap).inline
    assert not_(cheap).inline
    assert not and_(cheap, resource_version_changed()).inline
