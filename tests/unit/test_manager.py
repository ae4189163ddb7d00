"""The manager without a cluster: the Runnable lifecycle, per-manager metrics, deadlines.

A manager whose cache watches nothing never talks to the API server, so its whole
start/stop sequence runs here; the REST client points at a closed local port, which
refuses at once, for the tests that count requests.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client

from cronjob_operator.envtest import wait_for
from cronjob_operator.envtest._components import free_ports
from cronjob_operator.runtime import (
    LeaderElectionConfig,
    Manager,
    Options,
    Reconciler,
    Request,
    RestClient,
    Result,
    context,
    errors,
    objects,
)
from cronjob_operator.runtime.client import RetryPolicy
from cronjob_operator.runtime.controller import Controller, RetryLimits
from cronjob_operator.runtime.errors import TransportError
from cronjob_operator.runtime.kinds import CONFIG_MAP, POD
from cronjob_operator.runtime.manager import SKIPPED_REASON
from cronjob_operator.runtime.metrics import Metrics
from tests.unit.lease_api import LeaseApi


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def rest() -> RestClient:
    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{closed_port()}"
    return RestClient(configuration, retry=RetryPolicy(max_retries=0))


class Journal:
    """Runnables that write when they start and stop, in one shared order."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.lock = threading.Lock()
        self.all_started = threading.Event()
        self.expected = 0

    def write(self, entry: str) -> None:
        with self.lock:
            self.entries.append(entry)
            if sum(e.startswith("start") for e in self.entries) == self.expected:
                self.all_started.set()


class Recorded:
    def __init__(self, journal: Journal, name: str, *, leader: bool) -> None:
        self.journal = journal
        self.name = name
        self.needs_leader_election = leader
        journal.expected += 1

    def run(self, stop: threading.Event) -> None:
        self.journal.write(f"start {self.name}")
        stop.wait()
        self.journal.write(f"stop {self.name}")


@pytest.fixture
def running() -> Iterator[list[tuple[Manager, threading.Thread, list[int]]]]:
    started: list[tuple[Manager, threading.Thread, list[int]]] = []
    yield started
    for manager, thread, _ in started:
        manager.stop()
        thread.join(30)


def start(manager: Manager, started: list[tuple[Manager, threading.Thread, list[int]]]) -> None:
    codes: list[int] = []
    thread = threading.Thread(
        target=lambda: codes.append(manager.run(install_signal_handlers=False)), daemon=True
    )
    thread.start()
    started.append((manager, thread, codes))


def run_until_all_started_then_stop(
    manager: Manager,
    journal: Journal,
    running: list[tuple[Manager, threading.Thread, list[int]]],
) -> None:
    """Run the manager until every recorded runnable started, stop it, and check it
    exited 0."""
    start(manager, running)
    assert journal.all_started.wait(30)
    manager.stop()
    _, thread, codes = running[0]
    thread.join(30)
    assert codes == [0]


def test_runnables_start_and_stop_in_the_documented_order(
    rest: RestClient, running: list[tuple[Manager, threading.Thread, list[int]]]
) -> None:
    manager = Manager(rest, Options(health_probe_bind_address="0"))
    journal = Journal()
    for name, leader in [("webhook", False), ("controller", True), ("other", False)]:
        manager.add(Recorded(journal, name, leader=leader))
    run_until_all_started_then_stop(manager, journal, running)
    starts = [e for e in journal.entries if e.startswith("start")]
    assert starts[-1] == "start controller"  # the leader runnable comes after the others
    assert journal.entries[len(starts) :] == ["stop controller", "stop other", "stop webhook"]


def test_a_runnable_that_fails_stops_the_manager(
    rest: RestClient, running: list[tuple[Manager, threading.Thread, list[int]]]
) -> None:
    class Broken:
        needs_leader_election = False

        def run(self, stop: threading.Event) -> None:
            raise RuntimeError("broken on purpose")

    manager = Manager(rest, Options(health_probe_bind_address="0"))
    manager.add(Broken())
    start(manager, running)
    _, thread, codes = running[0]
    thread.join(30)
    assert codes == [1]


def adds(metrics: Metrics, controller: str) -> float | None:
    labels = {"name": controller, "controller": controller}
    return metrics.registry.get_sample_value("workqueue_adds_total", labels)


def test_two_managers_keep_their_own_counters(rest: RestClient) -> None:
    first, second = Manager(rest), Manager(rest)
    controllers = [
        m.builder("same-name").for_(POD).complete(lambda_reconciler()) for m in (first, second)
    ]
    controllers[0].queue.add(Request("ns", "a"))
    controllers[0].queue.add(Request("ns", "b"))
    assert adds(first.metrics, "same-name") == 2
    assert adds(second.metrics, "same-name") == 0

    with pytest.raises(TransportError):
        first.rest.request("GET", "/version")
    refused = {"code": "<error>", "method": "GET", "host": first.rest.host.split("//")[1]}
    assert first.metrics.registry.get_sample_value("rest_client_requests_total", refused) == 1
    assert second.metrics.registry.get_sample_value("rest_client_requests_total", refused) is None


def lambda_reconciler() -> Reconciler:
    class Done:
        def reconcile(self, request: Request) -> Result:
            return Result()

    return Done()


def test_a_rest_call_honours_the_context(rest: RestClient) -> None:
    counted = rest.with_metrics(Metrics())
    expired = context.Context(deadline=time.monotonic() - 1)
    with context.scope(expired), pytest.raises(errors.DeadlineExceeded, match="deadline"):
        counted.request("GET", "/version")
    stopped = context.Context()
    stopped.stop.set()
    with context.scope(stopped), pytest.raises(errors.DeadlineExceeded, match="stopped"):
        counted.request("GET", "/version")
    assert not errors.is_transient(errors.DeadlineExceeded("x"))


def test_a_context_deadline_bounds_waits() -> None:
    ctx = context.BACKGROUND.with_timeout(0.05)
    began = time.monotonic()
    assert ctx.wait(60)  # returns at the deadline, not after a minute
    assert time.monotonic() - began < 30
    assert context.current() is context.BACKGROUND
    with context.scope(ctx):
        assert context.current() is ctx


def test_a_reconcile_runs_within_the_reconcile_timeout(rest: RestClient) -> None:
    seen: list[float | None] = []
    done = threading.Event()

    class Looks:
        def reconcile(self, request: Request) -> Result:
            seen.append(context.current().remaining())
            done.set()
            return Result()

    manager = Manager(rest, Options(reconcile_timeout=30.0))
    controller = manager.builder("bounded").for_(POD).complete(Looks())
    assert controller.reconcile_timeout == 30.0
    controller.start()
    try:
        controller.queue.add(Request("ns", "a"))
        assert done.wait(30)
    finally:
        controller.stop(5)
    [remaining] = seen
    assert remaining is not None
    assert 0 < remaining <= 30


def test_the_managers_retry_limits_reach_the_controllers_it_builds(rest: RestClient) -> None:
    limits = RetryLimits(base_delay=0.001, max_delay=1.0, qps=0.001, burst=1)
    manager = Manager(rest, Options(retry_limits=limits))
    controller = manager.builder("bounded-retries").for_(POD).complete(lambda_reconciler())
    queue = controller.queue
    queue.add_rate_limited(Request("ns", "first"))
    queue.add_rate_limited(Request("ns", "second"))  # the bucket's next token: 1,000 s away
    assert queue.get(timeout=30) == Request("ns", "first")
    assert queue.get(timeout=0.05) is None
    queue.shut_down()


class Blocking:
    """A reconciler that reports its context, then blocks in a "call" until ``gate`` opens
    and finally writes a ConfigMap: a reconcile in flight when the Lease goes."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.finished = threading.Event()
        self.cancelled: list[bool] = []
        self.write_errors: list[BaseException] = []

    def reconcile(self, request: Request) -> Result:
        self.entered.set()
        ctx = context.current()
        while not (self.gate.is_set() or ctx.stop.is_set()):
            self.gate.wait(0.01)
        self.cancelled.append(ctx.stop.is_set())
        self.gate.wait(60)  # a call that ignores the cancellation: still blocked
        try:
            with context.scope(context.BACKGROUND):  # no context: only the fence can stop it
                self.manager.client.create(
                    CONFIG_MAP, {"metadata": {"name": "x", "namespace": "a"}}
                )
        except errors.NotLeader as exc:
            self.write_errors.append(exc)
        self.finished.set()
        return Result()


def leading_manager(api: LeaseApi, **options: Any) -> tuple[Manager, Blocking]:
    election = LeaderElectionConfig(
        name="lock", namespace="a", lease_duration=2.0, renew_deadline=1.0, retry_period=0.1
    )
    manager = Manager(
        api.client(),
        Options(health_probe_bind_address="0", leader_election=election, **options),
    )
    reconciler = Blocking(manager)
    controller = Controller("blocking", reconciler, base_context=manager.leader_context)
    manager.add_controller(controller)
    return manager, reconciler


def leading_with_a_reconcile_in_flight(
    api: LeaseApi,
    running: list[tuple[Manager, threading.Thread, list[int]]],
    **options: Any,
) -> tuple[Manager, Blocking, Controller]:
    """A started manager that leads, with one reconcile entered and held at its gate."""
    manager, reconciler = leading_manager(api, **options)
    start(manager, running)
    wait_for(lambda: manager.elector is not None and manager.elector.is_leader, 10)
    controller = next(r for r in manager._runnables if isinstance(r, Controller))
    wait_for(lambda: controller._started, 10, message="the controller to start")
    controller.queue.add(Request("a", "x"))
    assert reconciler.entered.wait(10)
    return manager, reconciler, controller


def test_a_lost_lease_cancels_reconciles_and_exits_1_without_draining(
    running: list[tuple[Manager, threading.Thread, list[int]]],
) -> None:
    # Failed before: the manager drained for the graceful shutdown timeout (60 s here)
    # while the reconcile ran under context.BACKGROUND, so nothing was cancelled and
    # run() had not returned after 20 s.
    api = LeaseApi()
    _, reconciler, _ = leading_with_a_reconcile_in_flight(
        api, running, graceful_shutdown_timeout=60.0
    )
    api.take("lock", holder="someone-else")
    _, thread, codes = running[0]
    try:
        thread.join(20)
        assert codes == [1]
        wait_for(lambda: reconciler.cancelled, 10, message="the reconcile to see its context")
        assert reconciler.cancelled == [True], "the reconcile's context was cancelled"
        assert not reconciler.finished.is_set(), "run() returned without awaiting it"
    finally:
        reconciler.gate.set()
    assert reconciler.finished.wait(10)
    assert [type(exc) for exc in reconciler.write_errors] == [errors.NotLeader]
    assert api.writes() == [], "no write of the deposed leader reached the server"


def test_sigterm_lets_a_reconcile_in_flight_write_then_releases_the_lease(
    running: list[tuple[Manager, threading.Thread, list[int]]],
) -> None:
    api = LeaseApi()
    manager, reconciler, controller = leading_with_a_reconcile_in_flight(api, running)
    manager.stop()
    wait_for(lambda: controller.queue.shutting_down, 10, message="intake to stop")
    assert not manager.leader_context.stop.is_set(), "SIGTERM does not cancel reconciles"
    assert manager.elector is not None
    assert api.holder("lock") == manager.elector.identity, "still held while draining"
    reconciler.gate.set()
    _, thread, codes = running[0]
    thread.join(20)
    assert codes == [0]
    assert reconciler.cancelled == [False]
    assert reconciler.write_errors == []
    assert api.writes() == [("POST", "/api/v1/namespaces/a/configmaps")]
    assert api.holder("lock") == "", "released after the drain"


def test_an_object_the_cache_skips_gets_a_warning_event_and_is_counted(rest: RestClient) -> None:
    manager = Manager(rest, Options(health_probe_bind_address="0"))
    asked: list[tuple[objects.Obj, str, str, str]] = []
    manager.recorder.event = lambda *args: asked.append(args)  # type: ignore[method-assign]
    informer = manager.cache.informer(CONFIG_MAP)
    reflector = informer._reflector

    def too_deep(obj: dict[str, Any]) -> dict[str, Any]:
        raise RecursionError("too deep")

    reflector._transform = too_deep
    meta = {"name": "deep", "namespace": "ns", "uid": "u1", "resourceVersion": "3"}
    reflector._handle({"type": "ADDED", "object": {"metadata": meta, "data": {}}})
    [(reference, type_, reason, message)] = asked
    assert (objects.object_key(reference), reference["metadata"]["uid"]) == ("ns/deep", "u1")
    assert (type_, reason) == ("Warning", SKIPPED_REASON)
    assert "RecursionError: too deep" in message
    count = manager.metrics.registry.get_sample_value(
        "informer_objects_skipped_total", {"kind": str(CONFIG_MAP)}
    )
    assert count == 1


def test_a_shutdown_first_fails_readiness_and_drains_for_the_delay(
    rest: RestClient, running: list[tuple[Manager, threading.Thread, list[int]]]
) -> None:
    """SIGTERM -> readiness fails and the shutdown hooks run while everything still runs;
    only ``shutdown_delay`` later does anything stop (a Service stops routing first)."""
    (port,) = free_ports(1)
    delay = 0.5
    options = Options(health_probe_bind_address=f"127.0.0.1:{port}", shutdown_delay=delay)
    manager = Manager(rest, options)
    journal = Journal()
    manager.add(Recorded(journal, "webhook", leader=False))
    manager.add(Recorded(journal, "controller", leader=True))
    seen: dict[str, Any] = {}

    def drain() -> None:
        seen["readyz"] = readyz(port)
        seen["at"] = time.monotonic()
        journal.write("drain")

    manager.on_shutdown(drain)
    run_until_all_started_then_stop(manager, journal, running)
    assert seen["readyz"][0] == 500
    assert "shutting down" in seen["readyz"][1]
    assert journal.entries[-3:] == ["drain", "stop controller", "stop webhook"]
    assert time.monotonic() - seen["at"] >= delay


def readyz(port: int) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/readyz?verbose")
        answer = connection.getresponse()
        return answer.status, answer.read().decode()
    finally:
        connection.close()
