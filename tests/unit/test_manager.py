"""The manager without a cluster: the Runnable lifecycle, per-manager metrics, deadlines.

A manager whose cache watches nothing never talks to the API server, so its whole
start/stop sequence runs here; the REST client points at a closed local port, which
refuses at once, for the tests that count requests.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client

from cronjob_operator.runtime import (
    POD,
    Manager,
    Options,
    Reconciler,
    Request,
    RestClient,
    Result,
    TransportError,
    context,
    errors,
)
from cronjob_operator.runtime._rest import RetryPolicy
from cronjob_operator.runtime.metrics import Metrics


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


def test_runnables_start_and_stop_in_the_documented_order(
    rest: RestClient, running: list[tuple[Manager, threading.Thread, list[int]]]
) -> None:
    manager = Manager(rest, Options(health_probe_bind_address="0"))
    journal = Journal()
    for name, leader in [("webhook", False), ("controller", True), ("other", False)]:
        manager.add(Recorded(journal, name, leader=leader))
    start(manager, running)
    assert journal.all_started.wait(30)
    manager.stop()
    _, thread, codes = running[0]
    thread.join(30)
    assert codes == [0]
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
