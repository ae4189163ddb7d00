"""spec.runStartTimeoutSeconds (issue 40 item 3) on the local control plane.

A Job whose Pod the real scheduler cannot place (a nodeSelector no kwok node matches)
stays Pending under Forbid; the controller, on a fake clock moved past the timeout
measured from the Job's real status.startTime, ends it, counts a failed run, names the
scheduler's reason in its event, and the next scheduled run starts. Read back through
kubectl, as a user would.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.controllers import cronjob
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controllerutil import parse_time
from cronjob_operator.runtime.manager import Options
from tests.integration.support import RunningManager, apply, install_crds
from tests.integration.support import running_manager as start_manager
from tests.integration.test_cronjob_controller import (
    World,
    created_at,
    cronjob_object,
    run_at,
    tick_after,
)

TIMEOUT = timedelta(seconds=900)
"""Longer than the first tick can be ahead of the real time the Job starts (at most ten
minutes), so the fake clock at that tick is still within the timeout."""


@pytest.fixture(scope="module", autouse=True)
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def operator(control_plane: ControlPlane, clock: FakeClock) -> Iterator[RunningManager]:
    setups = {"cronjob": lambda mgr: cronjob.setup(mgr, clock=clock)}
    with start_manager(
        control_plane, setups, options=Options(health_probe_bind_address="0")
    ) as running:
        yield running


@pytest.fixture
def world(control_plane: ControlPlane, namespace: str) -> World:
    return World(control_plane, namespace)


def unschedulable(world: World, job: str) -> dict[str, Any] | None:
    """The PodScheduled=False condition of the Job's Pod, once the scheduler wrote it."""
    pods = world.cp.kubectl_json(
        "get", "pods", "-n", world.ns, "-l", f"batch.kubernetes.io/job-name={job}"
    )["items"]
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if condition["type"] == "PodScheduled" and condition["status"] == "False":
                return condition  # type: ignore[no-any-return]
    return None


def event_messages(world: World, name: str, reason: str) -> list[str]:
    items = world.cp.kubectl_json(
        "get", "events", "-n", world.ns, "--field-selector", f"involvedObject.name={name}"
    )["items"]
    return [event["message"] for event in items if event["reason"] == reason]


def start_of(world: World, job: str) -> datetime | None:
    return parse_time(((world.jobs().get(job) or {}).get("status") or {}).get("startTime"))


def test_a_run_whose_pod_stays_pending_is_ended_and_the_next_run_starts(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    body = cronjob_object(
        "stuck",
        world.ns,
        concurrencyPolicy="Forbid",
        runStartTimeoutSeconds=int(TIMEOUT.total_seconds()),
    )
    body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["nodeSelector"] = {
        "example.com/no-node-has-this": "true"
    }
    apply(world.cp, body)
    wait_for(lambda: world.condition("stuck", "Available"), 30, message="first reconcile")
    first = run_at(operator, clock, world, "stuck", tick_after(created_at(world, "stuck")))
    wait_for(lambda: start_of(world, first), 30, message="the Job controller started the Job")
    wait_for(lambda: unschedulable(world, first), 60, message="the scheduler gave up on the Pod")
    started = start_of(world, first)
    assert started is not None

    clock.set(started + TIMEOUT - timedelta(seconds=1))
    operator.kick_and_wait("cronjob", world.ns, "stuck")
    assert first in world.jobs(), "a second before its timeout the run waits"

    clock.set(started + TIMEOUT + timedelta(seconds=1))
    nextrun = f"stuck-{int(tick_after(clock(), 0).timestamp())}"
    operator.kick("cronjob", world.ns, "stuck")
    wait_for(lambda: nextrun in world.jobs(), 30, message="the next scheduled run started")
    assert first not in world.jobs()
    status = world.status("stuck")
    assert status["consecutiveFailures"] == 1
    assert [ref["name"] for ref in status["active"]] == [nextrun]
    (message,) = event_messages(world, "stuck", "RunStartTimeout")
    assert message.startswith(f"Job {first}: no Pod started within spec.runStartTimeoutSeconds")
    assert "Unschedulable: 0/" in message
    assert "didn't match Pod's node affinity/selector" in message
