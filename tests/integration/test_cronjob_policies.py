"""Catch-up, BufferOne, skipped-run accounting (issue 23) and the limit shared by CronJobs
(issue 40: ConcurrencyGroup) on the local control plane.

The controller runs with a fake clock that a test moves, then kicks the CronJob, as in
test_cronjob_controller; an outage is the clock jumping several schedule times. Jobs run
under kwok. Everything is read back through kubectl, as a user would.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.controllers import concurrencygroup, cronjob
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controllerutil import parse_time, rfc3339
from cronjob_operator.runtime.manager import Options
from tests.integration.support import RunningManager, apply, install_crds, refused_by_rule
from tests.integration.support import running_manager as start_manager
from tests.integration.test_cronjob_controller import (
    FIVE_MINUTES,
    World,
    created_at,
    cronjob_object,
    run_at,
    tick_after,
)
from tests.integration.test_cronjob_features import CJT, kubectl_cjt


@pytest.fixture(scope="module", autouse=True)
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def manager(
    control_plane: ControlPlane, clock: FakeClock
) -> AbstractContextManager[RunningManager]:
    setups = {
        "cronjob": lambda mgr: cronjob.setup(mgr, clock=clock),
        "concurrencygroup": lambda mgr: concurrencygroup.setup(mgr, clock=clock),
    }
    return start_manager(control_plane, setups, options=Options(health_probe_bind_address="0"))


@pytest.fixture
def operator(control_plane: ControlPlane, clock: FakeClock) -> Iterator[RunningManager]:
    with manager(control_plane, clock) as running:
        yield running


@pytest.fixture
def world(control_plane: ControlPlane, namespace: str) -> World:
    return World(control_plane, namespace)


def scheduled_jobs(world: World, name: str) -> list[str]:
    """The CronJob's scheduled Jobs, oldest first (names end in the Unix seconds)."""
    prefix = f"{name}-"
    return sorted(
        job for job in world.jobs() if job.startswith(prefix) and job[len(prefix) :].isdigit()
    )


def job_of(name: str, moment: datetime) -> str:
    return f"{name}-{int(moment.timestamp())}"


def has_job(world: World, job: str) -> bool:
    return job in world.jobs()


def accounted_to(world: World, name: str, moment: str) -> bool:
    return (world.status(name).get("skippedRuns") or {}).get("accountedThrough") == moment


def test_catch_up_all_runs_every_missed_time_once_across_a_restart(
    control_plane: ControlPlane, clock: FakeClock, world: World
) -> None:
    with manager(control_plane, clock) as operator:
        # A history of 10: the four Jobs finish at once and 3 would prune the oldest.
        all_ = cronjob_object("all", world.ns, catchUpPolicy="All", successfulJobsHistoryLimit=10)
        apply(world.cp, all_)
        wait_for(lambda: world.condition("all", "Available"), 30, message="first reconcile")
        ticks = [tick_after(created_at(world, "all"), n) for n in (1, 2, 3, 4)]
        run_at(operator, clock, world, "all", ticks[-1])  # down through four ticks
        wait_for(lambda: len(scheduled_jobs(world, "all")) >= 2, 60, message="the catch-up started")
    # A restart (a leader change) in the middle: the new manager continues from the Jobs.
    with manager(control_plane, clock) as operator:
        operator.kick("cronjob", world.ns, "all")
        expected = [job_of("all", tick) for tick in ticks]
        wait_for(
            lambda: world.status("all").get("lastScheduleTime") == rfc3339(ticks[-1]),
            60,
            message="every missed time ran",
        )
        assert scheduled_jobs(world, "all") == expected
        assert (world.status("all").get("skippedRuns") or {}).get("catchUpBound") is None


def test_latest_counts_the_missed_times_it_does_not_run(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(world.cp, cronjob_object("latest", world.ns))
    wait_for(lambda: world.condition("latest", "Available"), 30, message="first reconcile")
    ticks = [tick_after(created_at(world, "latest"), n) for n in (1, 2, 3)]
    run_at(operator, clock, world, "latest", ticks[-1])
    wait_for(
        lambda: (world.status("latest").get("skippedRuns") or {}).get("catchUpBound") == 2,
        60,
        message="the two older times counted",
    )
    assert scheduled_jobs(world, "latest") == [job_of("latest", ticks[-1])]
    assert world.status("latest")["skippedRuns"]["accountedThrough"] == rfc3339(ticks[-1])
    wait_for(
        lambda: "RunsSkipped" in world.event_reasons("latest"), 30, message="the Warning event"
    )


def test_buffer_one_starts_the_waiting_time_when_the_run_ends_and_counts_the_rest(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(world.cp, cronjob_object("buf", world.ns, run="1h", concurrencyPolicy="BufferOne"))
    wait_for(lambda: world.condition("buf", "Available"), 30, message="first reconcile")
    ticks = [tick_after(created_at(world, "buf"), n) for n in (1, 2, 3)]
    first = run_at(operator, clock, world, "buf", ticks[0])
    wait_for(lambda: world.status("buf").get("active"), 30, message=f"{first} active")
    run_at(operator, clock, world, "buf", ticks[1])
    wait_for(
        lambda: world.status("buf").get("bufferedRun") == rfc3339(ticks[1]),
        30,
        message="the second time waits",
    )
    run_at(operator, clock, world, "buf", ticks[2])
    wait_for(
        lambda: (world.status("buf").get("skippedRuns") or {}).get("bufferFull") == 1,
        30,
        message="the third time is skipped: one waits already",
    )
    assert scheduled_jobs(world, "buf") == [first]
    world.cp.kubectl("delete", "job", first, "-n", world.ns, "--wait=false", check=True)
    buffered = job_of("buf", ticks[1])
    wait_for(lambda: buffered in world.jobs(), 60, message="the buffered run starts")
    wait_for(lambda: "bufferedRun" not in world.status("buf"), 30, message="buffer emptied")
    assert world.status("buf")["lastScheduleTime"] == rfc3339(ticks[1])
    assert job_of("buf", ticks[2]) not in world.jobs()


def test_forbid_counts_a_skipped_time_once(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(world.cp, cronjob_object("fbd", world.ns, run="1h", concurrencyPolicy="Forbid"))
    wait_for(lambda: world.condition("fbd", "Available"), 30, message="first reconcile")
    ticks = [tick_after(created_at(world, "fbd"), n) for n in (1, 2, 3)]
    run_at(operator, clock, world, "fbd", ticks[0])
    wait_for(lambda: world.status("fbd").get("active"), 30, message="the first run is active")
    for tick in ticks[1:]:
        run_at(operator, clock, world, "fbd", tick)
        before = rfc3339(tick - FIVE_MINUTES)
        wait_for(
            functools.partial(accounted_to, world, "fbd", before),
            30,
            message=f"accounted up to {before} (the time due now may still run)",
        )
    assert world.status("fbd")["skippedRuns"].get("forbidWhileActive") == 1
    # Reconciles after the count change nothing.
    operator.kick_and_wait("cronjob", world.ns, "fbd")
    operator.kick_and_wait("cronjob", world.ns, "fbd")
    assert world.status("fbd")["skippedRuns"].get("forbidWhileActive") == 1
    assert scheduled_jobs(world, "fbd") == [job_of("fbd", ticks[0])]


def test_several_schedules_run_their_union_and_show_in_kubectl_get(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    both = cronjob_object("both", world.ns, schedules=["*/10 * * * *"])
    refused = world.cp.kubectl("apply", "-f", "-", input=json.dumps(both))
    assert refused.returncode != 0
    assert refused_by_rule(
        refused.stderr, "spec", "set exactly one of spec.schedule and spec.schedules"
    ), refused.stderr
    union = cronjob_object("union", world.ns)
    union["spec"].pop("schedule")
    union["spec"]["schedules"] = ["*/10 * * * *", "*/15 * * * *"]
    apply(world.cp, union)
    wait_for(lambda: world.condition("union", "Available"), 30, message="first reconcile")
    created = created_at(world, "union")
    ticks = [tick_after(created, n) for n in range(1, 13)]
    due = [t for t in ticks if t.minute % 10 == 0 or t.minute % 15 == 0]
    # Walk the clock over each union time: a time both schedules share runs once.
    for moment in due[:4]:
        job = run_at(operator, clock, world, "union", moment)
        wait_for(functools.partial(has_job, world, job), 30, message=f"job {job}")
    assert scheduled_jobs(world, "union") == [job_of("union", t) for t in due[:4]]
    wait_for(
        lambda: world.status("union").get("nextScheduleTime") == rfc3339(due[4]),
        30,
        message="the next time is the union's",
    )
    table = world.cp.kubectl("get", "cjt", "union", "-n", world.ns, check=True).stdout
    header, row = table.splitlines()
    assert "SCHEDULES" in header
    assert "*/10 * * * *; */15 * * * *" in row


def test_a_backfill_through_the_plugin_runs_each_time_once_in_order(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    # Hourly at the minute half an hour from now: the clock below (a minute after the
    # creation) never reaches a time of its own, only the backfill's run.
    minute = (datetime.now(UTC).minute + 30) % 60
    bf = cronjob_object(
        "bf",
        world.ns,
        schedule=f"{minute} * * * *",
        concurrencyPolicy="Forbid",
        successfulJobsHistoryLimit=10,
    )
    apply(world.cp, bf)
    wait_for(lambda: world.condition("bf", "Available"), 30, message="first reconcile")
    clock.set(created_at(world, "bf") + timedelta(minutes=1))
    start = datetime(2026, 1, 1, minute=minute, tzinfo=UTC)
    too_many = kubectl_cjt(
        world,
        "backfill",
        "bf",
        "-n",
        world.ns,
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-03-01T00:00:00Z",
    )
    assert too_many.returncode == 1
    assert "more than 1000 scheduled times" in too_many.stderr
    asked = kubectl_cjt(
        world,
        "backfill",
        "bf",
        "-n",
        world.ns,
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-01T03:00:00Z",
        "--wait",
        "--timeout",
        "120",
    )
    assert asked.returncode == 0, asked.stderr
    assert "3 scheduled time(s)" in asked.stdout
    assert "Complete, 3/3 done" in asked.stdout.splitlines()[-1]
    expected = [job_of("bf", start + timedelta(hours=h)) for h in range(3)]
    assert scheduled_jobs(world, "bf") == expected
    created = sorted(expected, key=lambda name: world.jobs()[name]["metadata"]["creationTimestamp"])
    assert created == expected, "in order"
    # Unset before: it moves forward to the newest Job there is, as for any Job of its name.
    assert world.status("bf")["lastScheduleTime"] == rfc3339(start + timedelta(hours=2))
    shown = kubectl_cjt(world, "backfill", "bf", "-n", world.ns)
    assert "Complete, 3/3 done" in shown.stdout
    assert "BackfillComplete" in world.event_reasons("bf")
    history = kubectl_cjt(world, "history", "bf", "-n", world.ns).stdout.splitlines()[1:]
    assert {line.split()[1]: line.split()[2] for line in history} == dict.fromkeys(
        expected, "backfill"
    )


# --- spec.concurrencyGroup (issue 40 item 1) -------------------------------------------

GROUPS = "concurrencygroups.batch.tutorial.kubebuilder.io"


def group_object(name: str, namespace: str, limit: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "ConcurrencyGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"limit": limit},
    }


def grouped_cronjob(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    """A CronJob on ``* * * * *`` (its other fields ``spec``, the group among them)."""
    return cronjob_object(name, namespace, schedule="* * * * *", **spec)


def group_created(
    control_plane: ControlPlane, clock: FakeClock, world: World, name: str
) -> datetime:
    """Create the ConcurrencyGroup ``name`` with limit 1 and set the clock to now."""
    apply(control_plane, group_object(name, world.ns, 1))
    now = datetime.now(UTC)
    clock.set(now)
    return now


def in_use(control_plane: ControlPlane, namespace: str, group: str) -> int:
    status = control_plane.kubectl_json("get", GROUPS, group, "-n", namespace).get("status")
    return int((status or {}).get("inUse") or 0)


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
    now = group_created(control_plane, clock, world, "nightly")
    names = ["g-a", "g-b", "g-c"]
    for name in names:
        apply(
            control_plane,
            grouped_cronjob(name, world.ns, run="10s", concurrencyGroup={"name": "nightly"}),
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
    wait_for(lambda: in_use(control_plane, world.ns, "nightly") == 0, 30, message="slots free")
    assert all("waitingForGroup" not in world.status(n) for n in names)


def group_version(control_plane: ControlPlane, namespace: str, group: str) -> str:
    metadata = control_plane.kubectl_json("get", GROUPS, group, "-n", namespace)["metadata"]
    return str(metadata["resourceVersion"])


def test_waiting_runs_write_nothing_and_the_oldest_starts_when_the_holder_finishes(
    control_plane: ControlPlane, operator: RunningManager, clock: FakeClock, world: World
) -> None:
    """Two runs wait behind a 20-s holder: the group is not written while they wait (no
    poll), and the oldest (then by name) starts once the holder finishes, woken by the
    group's change. Failed before: each waiting CronJob asked again every 5 s and moved
    its place to the end of status.waiting, a write of the group each time."""
    now = group_created(control_plane, clock, world, "slot")
    names = {"holder": "20s", "w-b": "10s", "w-a": "10s"}
    for name, run in names.items():
        apply(
            control_plane,
            grouped_cronjob(name, world.ns, run=run, concurrencyGroup={"name": "slot"}),
        )
    wait_for(lambda: all(world.condition(n, "Available") for n in names), 30, message="reconciled")
    tick = next_minute(now)
    clock.set(tick + timedelta(seconds=1))
    operator.kick("cronjob", world.ns, "holder")
    holder = job_of("holder", tick)
    wait_for(lambda: has_job(world, holder), 30, message="the holder runs")
    for name in ("w-b", "w-a"):
        operator.kick("cronjob", world.ns, name)
    wait_for(
        lambda: all(world.status(n).get("waitingForGroup") for n in ("w-a", "w-b")),
        30,
        message="both runs waiting for the group",
    )
    waiting = group_version(control_plane, world.ns, "slot")
    while_waiting = set()

    def holder_done() -> bool:
        version = group_version(control_plane, world.ns, "slot")
        done = bool((world.jobs()[holder].get("status") or {}).get("completionTime"))
        if not done:  # read before the holder finished: a write while the runs waited
            while_waiting.add(version)
        return done

    wait_for(holder_done, 60, interval=0.5, message="the holder finishes")
    assert while_waiting <= {waiting}, "the group was written while the runs waited"
    first = job_of("w-a", tick)
    wait_for(lambda: has_job(world, first), 30, message="the oldest waiting run starts")
    _, holder_end = job_interval(world.jobs()[holder])
    started, _ = job_interval(world.jobs()[first])
    assert holder_end is not None
    assert started >= holder_end
    assert not has_job(world, job_of("w-b", tick))
    assert world.status("w-b").get("waitingForGroup")


def test_skip_counts_the_run_that_finds_the_group_full(
    control_plane: ControlPlane, operator: RunningManager, clock: FakeClock, world: World
) -> None:
    now = group_created(control_plane, clock, world, "one")
    apply(
        control_plane,
        grouped_cronjob("holder", world.ns, run="60s", concurrencyGroup={"name": "one"}),
    )
    skip = {"name": "one", "whenFull": "Skip"}
    apply(control_plane, grouped_cronjob("skipper", world.ns, concurrencyGroup=skip))
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


GROUP_NAME_PATTERN = (
    "/schema/openAPIV3Schema/properties/spec/properties/concurrencyGroup/properties/name/pattern"
)
"""Where the CRD's versions keep the subdomain pattern of spec.concurrencyGroup.name."""


@contextlib.contextmanager
def group_names_unchecked(control_plane: ControlPlane, namespace: str) -> Iterator[None]:
    """The CronJob CRD without the pattern of spec.concurrencyGroup.name (as it was before
    issue 47), then restored: what a CronJob stored then may still hold."""
    probe = grouped_cronjob("probe", namespace, concurrencyGroup={"name": "."})
    versions = control_plane.kubectl_json("get", "crd", CJT)["spec"]["versions"]
    remove = [{"op": "remove", "path": f"/spec/versions/{index}{GROUP_NAME_PATTERN}"}
              for index in range(len(versions))]  # fmt: skip
    control_plane.kubectl("patch", "crd", CJT, "--type=json", "-p", json.dumps(remove), check=True)
    try:
        wait_for(lambda: _dry_run_accepts(control_plane, probe), 30, message="relaxed CRD")
        yield
    finally:
        install_crds(control_plane)  # back to config/crd (patched only: apply restores it)
        wait_for(lambda: not _dry_run_accepts(control_plane, probe), 30, message="restored")


def test_a_group_name_with_dot_segments_takes_no_slot_in_another_namespace(
    control_plane: ControlPlane, operator: RunningManager, clock: FakeClock, world: World
) -> None:
    """A name stored past the webhook (none runs here) and before the schema's pattern
    (issue 47) is one escaped segment of the group's path, and "." or ".." is never
    sent: the CronJob finds no such group. Failed before: urllib3 resolved the dot
    segments to the other namespace's group, and the run took its only slot; "." became
    a LIST of the namespace's groups."""
    other = f"{world.ns}-other"
    control_plane.kubectl("create", "namespace", other, check=True)
    names = {"sneaky": f"../../{other}/concurrencygroups/theirs", "dot": ".", "dots": ".."}
    try:
        apply(control_plane, group_object("theirs", other, 1))
        apply(control_plane, group_object("ours", world.ns, 1))
        now = datetime.now(UTC)
        clock.set(now)
        with group_names_unchecked(control_plane, world.ns):
            for name, group in names.items():
                apply(
                    control_plane, grouped_cronjob(name, world.ns, concurrencyGroup={"name": group})
                )
        for name in names:
            wait_for(functools.partial(world.condition, name, "Degraded"), 30, message=name)
        clock.set(next_minute(now) + timedelta(seconds=1))
        for name in names:
            operator.kick("cronjob", world.ns, name)
            wait_for(
                functools.partial(degraded_by, world, name, "GroupNotFound"),
                30,
                message=f"{name}: the group not found",
            )
        assert in_use(control_plane, other, "theirs") == 0
        assert in_use(control_plane, world.ns, "ours") == 0
        assert world.jobs() == {}
    finally:
        control_plane.kubectl("delete", "namespace", other, "--wait=false")


def degraded_by(world: World, name: str, reason: str) -> bool:
    return (world.condition(name, "Degraded") or {}).get("reason") == reason


def _dry_run_accepts(control_plane: ControlPlane, obj: dict[str, Any]) -> bool:
    result = control_plane.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj))
    return result.returncode == 0


@pytest.mark.parametrize("limit", [0, 101])
def test_a_limit_out_of_range_is_refused_naming_the_field(
    control_plane: ControlPlane, world: World, limit: int
) -> None:
    result = control_plane.kubectl(
        "apply", "-f", "-", input=json.dumps(group_object("bad", world.ns, limit))
    )
    assert result.returncode != 0
    assert "spec.limit" in result.stderr
