"""spec.concurrencyGroup on the real control plane: three CronJobs, one slot.

The controller runs with a fake clock held at one scheduled time; Jobs really run (kwok
completes their pods after ``run``) and the waiting CronJobs ask again every
``WAIT_POLL``, so the three runs start one after another. The proof reads the Jobs the
API server holds: each was created no earlier than the previous one completed.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controllerutil import parse_time
from tests.integration.support import RunningManager, apply, install_crds
from tests.integration.test_cronjob_controller import World, cronjob_object
from tests.integration.test_cronjob_features import kubectl_cjt
from tests.integration.test_cronjob_policies import manager

GROUPS = "concurrencygroups.batch.tutorial.kubebuilder.io"


@pytest.fixture(scope="module", autouse=True)
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def operator(control_plane: ControlPlane, clock: FakeClock) -> Iterator[RunningManager]:
    with manager(control_plane, clock) as running:
        yield running


@pytest.fixture
def world(control_plane: ControlPlane, namespace: str) -> World:
    return World(control_plane, namespace)


def group_object(name: str, namespace: str, limit: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "ConcurrencyGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"limit": limit},
    }


def next_minute(after: datetime) -> datetime:
    return after.replace(second=0, microsecond=0) + timedelta(minutes=1)


def job_interval(job: dict[str, Any]) -> tuple[datetime, datetime | None]:
    created = parse_time(job["metadata"]["creationTimestamp"])
    assert created is not None
    return created, parse_time((job.get("status") or {}).get("completionTime"))


def overlapping(jobs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Pairs of Jobs that were active at once (created before the other completed)."""
    spans = sorted((job_interval(job), job["metadata"]["name"]) for job in jobs)
    pairs = []
    for ((_, end), name), ((start, _), other) in itertools.pairwise(spans):
        if end is None or start < end:
            pairs.append((name, other))
    return pairs


def test_three_cronjobs_with_limit_one_never_run_two_jobs_at_once(
    control_plane: ControlPlane, operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(control_plane, group_object("nightly", world.ns, 1))
    now = datetime.now(UTC)
    clock.set(now)
    names = ["g-a", "g-b", "g-c"]
    for name in names:
        apply(
            control_plane,
            cronjob_object(
                name, world.ns, schedule="* * * * *", run="3s", concurrencyGroup={"name": "nightly"}
            ),
        )
    wait_for(lambda: all(world.condition(n, "Available") for n in names), 30, message="reconciled")
    tick = next_minute(now)
    clock.set(tick + timedelta(seconds=1))
    for name in names:
        operator.kick("cronjob", world.ns, name)
    wait_for(
        lambda: sum(1 for n in names if world.status(n).get("waitingForGroup")) == 2,
        60,
        message="two runs waiting for the group",
    )
    group = control_plane.kubectl_json("get", GROUPS, "nightly", "-n", world.ns)
    assert len(group["status"].get("waiting") or ()) == 2, group
    shown = kubectl_cjt(world, "groups", "-n", world.ns)
    assert shown.returncode == 0, shown.stderr
    assert "nightly" in shown.stdout
    assert "@" in shown.stdout  # its waiting runs, cronjob@scheduledTime
    wait_for(
        lambda: (
            len([j for j in world.jobs().values() if j.get("status", {}).get("completionTime")])
            == 3
        ),
        120,
        message="the three runs, one after another",
    )
    jobs = list(world.jobs().values())
    assert sorted(j["metadata"]["name"] for j in jobs) == [
        f"{name}-{int(tick.timestamp())}" for name in names
    ]
    assert overlapping(jobs) == []
    group = control_plane.kubectl_json("get", GROUPS, "nightly", "-n", world.ns)
    wait_for(
        lambda: (
            control_plane.kubectl_json("get", GROUPS, "nightly", "-n", world.ns)["status"]["inUse"]
            == 0
        ),
        30,
        message="every slot free again",
    )
    assert group["spec"]["limit"] == 1
    assert all("waitingForGroup" not in world.status(n) for n in names)


def test_skip_counts_the_run_that_finds_the_group_full(
    control_plane: ControlPlane, operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(control_plane, group_object("one", world.ns, 1))
    now = datetime.now(UTC)
    clock.set(now)
    apply(
        control_plane,
        cronjob_object(
            "holder", world.ns, schedule="* * * * *", run="60s", concurrencyGroup={"name": "one"}
        ),
    )
    apply(
        control_plane,
        cronjob_object(
            "skipper",
            world.ns,
            schedule="* * * * *",
            concurrencyGroup={"name": "one", "whenFull": "Skip"},
        ),
    )
    wait_for(lambda: world.condition("skipper", "Available"), 30, message="reconciled")
    tick = next_minute(now)
    clock.set(tick + timedelta(seconds=1))
    operator.kick("cronjob", world.ns, "holder")
    wait_for(lambda: f"holder-{int(tick.timestamp())}" in world.jobs(), 30, message="holder runs")
    operator.kick("cronjob", world.ns, "skipper")
    wait_for(
        lambda: (world.status("skipper").get("skippedRuns") or {}).get("groupFull") == 1,
        30,
        message="the skipped run counted",
    )
    assert "RunsSkipped" in world.event_reasons("skipper")
    assert [job for job in world.jobs() if job.startswith("skipper-")] == []


@pytest.mark.parametrize("limit", [0, 101])
def test_a_limit_out_of_range_is_refused_naming_the_field(
    control_plane: ControlPlane, world: World, limit: int
) -> None:
    result = control_plane.kubectl(
        "apply", "-f", "-", input=json.dumps(group_object("bad", world.ns, limit))
    )
    assert result.returncode != 0
    assert "spec.limit" in result.stderr
