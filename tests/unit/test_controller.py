"""Controller semantics without a cluster: what each reconcile outcome does to the queue.

The informer side is exercised by driving the controller's event handler directly (the
same object the informer calls); the cluster-backed tests cover real watches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from cronjob_operator.envtest import wait_for
from cronjob_operator.runtime import errors, handlers, metrics, objects
from cronjob_operator.runtime.controller import Controller
from cronjob_operator.runtime.handlers import EnqueueHandler
from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.predicates import resource_version_changed
from cronjob_operator.runtime.reconcile import Request, Result, TerminalError

PARENT = Kind("example.com", "v1", "Parent", "parents")


class Recorder:
    """A reconciler whose behaviour per call is scripted by the test."""

    def __init__(self, script: Callable[[Request, int], Result]) -> None:
        self.calls: list[Request] = []
        self.script = script
        self.lock = threading.Lock()

    def reconcile(self, request: Request) -> Result:
        with self.lock:
            self.calls.append(request)
            count = self.calls.count(request)
        return self.script(request, count)


@pytest.fixture
def run() -> Iterator[Callable[[Recorder], Controller]]:
    started: list[Controller] = []

    def start(reconciler: Recorder) -> Controller:
        controller = Controller(f"test-{len(started)}-{id(reconciler)}", reconciler)
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


def test_for_owns_and_watches_enqueue_the_right_keys(run: Callable[[Recorder], Controller]) -> None:
    recorder = Recorder(lambda _r, _n: Result())
    controller = run(recorder)
    EnqueueHandler(controller.queue, handlers.for_object).on_add(obj("a"))
    EnqueueHandler(controller.queue, handlers.for_owner(PARENT)).on_add(obj("child", owner="b"))
    EnqueueHandler(controller.queue, handlers.for_owner(PARENT)).on_add(obj("orphan"))
    EnqueueHandler(controller.queue, lambda o: [Request("other", "c")]).on_delete(obj("x"))
    wait_for(lambda: len(recorder.calls) == 3, 5)
    assert set(recorder.calls) == {Request("ns", "a"), Request("ns", "b"), Request("other", "c")}


def test_predicates_filter_resyncs(run: Callable[[Recorder], Controller]) -> None:
    recorder = Recorder(lambda _r, _n: Result())
    controller = run(recorder)
    handler = EnqueueHandler(controller.queue, handlers.for_object, [resource_version_changed()])
    handler.on_update(obj("same"), obj("same"))
    handler.on_update(obj("changed", "1"), obj("changed", "2"))
    wait_for(lambda: recorder.calls == [Request("ns", "changed")], 5)


def test_errors_are_retried_with_backoff_then_forgotten(
    run: Callable[[Recorder], Controller],
) -> None:
    def fail_twice(_request: Request, count: int) -> Result:
        if count <= 2:
            raise errors.ServerError({"message": "boom"}, code=500)
        return Result()

    recorder = Recorder(fail_twice)
    controller = run(recorder)
    controller.queue.add(Request("ns", "flaky"))
    wait_for(lambda: len(recorder.calls) == 3, 5, message="two retries then success")
    wait_for(lambda: controller.queue.num_requeues(Request("ns", "flaky")) == 0, 5)


def test_a_raising_reconciler_does_not_kill_its_worker(
    run: Callable[[Recorder], Controller],
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


def test_terminal_errors_are_not_retried(run: Callable[[Recorder], Controller]) -> None:
    def terminal(_request: Request, _count: int) -> Result:
        raise TerminalError("cannot ever work")

    recorder = Recorder(terminal)
    controller = run(recorder)
    controller.queue.add(Request("ns", "doomed"))
    wait_for(lambda: len(recorder.calls) == 1, 5)
    assert controller.queue.num_requeues(Request("ns", "doomed")) == 0
    assert len(controller.queue) == 0


def test_requeue_after_brings_the_request_back(run: Callable[[Recorder], Controller]) -> None:
    recorder = Recorder(lambda _r, count: Result(requeue_after=0.05) if count == 1 else Result())
    controller = run(recorder)
    controller.queue.add(Request("ns", "later"))
    wait_for(lambda: len(recorder.calls) == 2, 5, message="requeued after the delay")


def test_one_object_is_never_reconciled_twice_at_once() -> None:
    inside: set[Request] = set()
    overlaps: list[Request] = []
    lock = threading.Lock()
    done = threading.Event()
    calls = 0

    class Slow:
        def reconcile(self, request: Request) -> Result:
            nonlocal calls
            with lock:
                if request in inside:
                    overlaps.append(request)
                inside.add(request)
                calls += 1
            done.wait(0.01)
            with lock:
                inside.discard(request)
            return Result()

    controller = Controller("overlap", Slow(), max_concurrent_reconciles=4)
    controller.start()
    try:
        for _ in range(50):
            for name in ("a", "b"):
                controller.queue.add(Request("ns", name))
        wait_for(lambda: len(controller.queue) == 0 and not inside, 10)
    finally:
        controller.stop(5)
    assert overlaps == []
    assert calls >= 2
